"""What the memory store's operations share: the item columns and a space's id (``core.memory``, ``core.vectors``)."""

from __future__ import annotations

from runtime.store.core.dialect import Dialect
from runtime.store.core.statements import Op, value

COLUMNS = "seq, id, uri, scope, content, tags, source, created_at, updated_at, tenant, project"
ITEM_COLUMNS = ", ".join("i." + c for c in COLUMNS.split(", "))


def find_space(d: Dialect, tenant: str, project: str, space: int | None) -> Op[int | None]:
    """The space's id (``space`` when already known: a space once made is never removed)."""
    if space is None:
        found = yield value("SELECT id FROM memory_spaces WHERE tenant = ? AND project = ?", tenant, project)
        space = None if found is None else int(found)
    return space
