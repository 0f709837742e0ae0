"""Every migration of the embedded store, in the order they apply.

Each layer owns its tables (``runtime/<layer>/schema.py``); this module only fixes the order.
Names are never reused or reordered once released: add new migrations at the end of a layer's list.
"""

from runtime.durable.schema import MIGRATIONS as DURABLE
from runtime.memory.schema import MIGRATIONS as MEMORY
from runtime.sessions.schema import MIGRATIONS as SESSIONS
from runtime.store.sqlite import Migration

ALL_MIGRATIONS: list[Migration] = [*SESSIONS, *DURABLE, *MEMORY]
