"""Every table of the store, described once (``runtime.store.core.schema``), layer by layer, and the
migration history of each backend: the steps in the order they apply. Names are released history:
never rename, reorder or remove a step; add new ones at the end of a layer's list (docs/architecture.md)."""

from runtime.store.core.schema import Step
from runtime.store.core.tables import access, artifacts, durable, memory, operations, sessions, webhooks

_SHARED = [*access.MIGRATIONS, *artifacts.MIGRATIONS, *operations.MIGRATIONS, *webhooks.MIGRATIONS]

SQLITE: list[Step] = [*sessions.SQLITE, *durable.SQLITE, *memory.SQLITE, *_SHARED]
POSTGRES: list[Step] = [*sessions.POSTGRES, *durable.POSTGRES, *memory.POSTGRES, *_SHARED]
