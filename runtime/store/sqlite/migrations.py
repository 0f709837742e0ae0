"""Every migration of the SQLite backend, in the order they apply.

The backend owns its schema: each layer's tables are in ``runtime/store/sqlite/schema/<layer>.py``
and this module fixes the order. Names are never reused or reordered once released: add new
migrations at the end of a layer's list.
"""

from runtime.store.migration import Migration
from runtime.store.sqlite.schema.access import MIGRATIONS as ACCESS
from runtime.store.sqlite.schema.artifacts import MIGRATIONS as ARTIFACTS
from runtime.store.sqlite.schema.durable import MIGRATIONS as DURABLE
from runtime.store.sqlite.schema.memory import MIGRATIONS as MEMORY
from runtime.store.sqlite.schema.operations import MIGRATIONS as OPERATIONS
from runtime.store.sqlite.schema.sessions import MIGRATIONS as SESSIONS
from runtime.store.sqlite.schema.webhooks import MIGRATIONS as WEBHOOKS

ALL_MIGRATIONS: list[Migration] = [*SESSIONS, *DURABLE, *MEMORY, *ACCESS, *ARTIFACTS, *OPERATIONS, *WEBHOOKS]
