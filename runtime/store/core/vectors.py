"""The memory items' vectors (semantic recall, CONTRACT §13), written once for both backends.

``memory_vectors`` holds one row per embedded item (its ``seq``): the model that made it, the
digest of the content it was made from, and the vector as int8 (``vec``, one byte per dimension)
times ``scale``. An item whose content changes keeps its row until it is embedded again, but a
row whose digest is not the item's is never used (``items``) and counts as not embedded
(``pending``), so writing an item costs no statement here: ``memory_remember`` is as fast as before.

How a process learns of new vectors: each row carries a ``stamp``, and a reader asks for the rows
stamped at or after the *horizon* it was given last time (``since``). On SQLite writers are
serialized: a stamp is one more than the largest, and the horizon is the largest plus one, read in
the same snapshot. On PostgreSQL, where transactions commit in any order, a stamp is the writer's
transaction id and the horizon the oldest transaction still running when the reader looked
(``pg_snapshot_xmin``): any row the reader has not seen was written by a transaction at or after
it. Rows read twice are harmless (the index keeps one vector per item). See ``Dialect.stamp_*``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.memory.model import MemoryItem
from runtime.memory.store import SUPERSEDED
from runtime.store.core.dialect import Dialect
from runtime.store.core.memory_rows import ITEM_COLUMNS
from runtime.store.core.statements import Executor, Op, Row, many, rows, tuples, value

#: Not superseded: such items left the keyword index and are not embedded either.
_LIVE = f"i.tags NOT LIKE '%\"{SUPERSEDED}\"%'"
_UNEMBEDDED = (
    "SELECT i.seq, i.digest, i.content, i.tags FROM memory_items i"
    " LEFT JOIN memory_vectors v ON v.seq = i.seq AND v.model = ? AND v.digest = coalesce(i.digest, '')"
    f" WHERE v.seq IS NULL AND {_LIVE}"
)
_PENDING = f"{_UNEMBEDDED} AND i.seq > ? ORDER BY i.seq LIMIT ?"


def _save_sql(d: Dialect) -> str:
    return (
        "INSERT INTO memory_vectors (seq, space_id, model, digest, scale, vec, stamp)"
        f" VALUES (?, ?, ?, ?, ?, ?, {d.stamp_next})"
        " ON CONFLICT (seq) DO UPDATE SET space_id = excluded.space_id, model = excluded.model,"
        " digest = excluded.digest, scale = excluded.scale, vec = excluded.vec, stamp = excluded.stamp"
    )


def pending(d: Dialect, model: str, after: int, limit: int) -> Op[list[Row]]:
    """Items (of every space) after ``seq`` ``after`` with no vector of ``model`` for their content."""
    found: list[Row] = yield rows(_PENDING, model, after, limit)
    return found


def pending_of(d: Dialect, model: str, ids: Sequence[str]) -> Op[list[Row]]:
    """Those of the items ``ids`` (of any space) with no vector of ``model`` for their content: one
    probe of the id index per item, where ``pending`` walks every item."""
    if not ids:
        return []
    where, args = d.in_list(list(ids))
    found: list[Row] = yield rows(f"{_UNEMBEDDED} AND i.id{where} ORDER BY i.seq", model, *args)
    return found


def save(d: Dialect, model: str, made: Sequence[tuple[int, str, float, bytes]]) -> Op[int]:
    """Store vectors made from items (``seq``, digest of what was embedded, scale, int8 bytes); a
    vector of content an item no longer holds is dropped (the item is pending again). Returns how
    many were stored."""
    if not made:
        return 0
    seqs = [m[0] for m in made]
    where, args = d.in_list(seqs, "bigint")
    current = yield rows(
        f"SELECT seq, space_id, coalesce(digest, '') AS digest FROM memory_items WHERE seq{where}{d.for_update}", *args
    )
    now = {int(r["seq"]): (int(r["space_id"]), r["digest"]) for r in current}
    keep = [
        (seq, now[seq][0], model, digest, scale, vec)
        for seq, digest, scale, vec in made
        if seq in now and now[seq][1] == digest
    ]
    if keep:
        yield many(_save_sql(d), keep)
    return len(keep)


def since(
    d: Dialect, tenant: str, project: str, model: str, horizon: int
) -> Op[tuple[int | None, int, list[tuple[Any, ...]]]]:
    """The space, the next horizon, and ``(seq, scope, scale, vec)`` of the vectors of ``model``
    stamped at or after ``horizon`` (every one when it is 0).

    One statement (a consistent snapshot by itself): the horizon and the space's id come on every row
    (one row of NULL vectors when none is new). A search reads this each time, and on PostgreSQL a read
    of two statements is a transaction: BEGIN, two reads, COMMIT were four round trips where this is one."""
    found: list[tuple[Any, ...]] = yield tuples(
        f"SELECT h.nxt, h.space, f.seq, f.scope, f.scale, f.vec FROM (SELECT ({d.stamp_horizon}) AS nxt,"
        " (SELECT id FROM memory_spaces WHERE tenant = ? AND project = ?) AS space) h"
        " LEFT JOIN (SELECT v.seq, i.scope, v.scale, v.vec, v.space_id FROM memory_vectors v"
        " JOIN memory_items i ON i.seq = v.seq WHERE v.model = ? AND v.stamp >= ?) f ON f.space_id = h.space",
        tenant,
        project,
        model,
        horizon,
    )
    first = found[0]
    if first[1] is None:
        return None, horizon, []
    return int(first[1]), int(first[0] or 0), [(r[2], r[3], r[4], r[5]) for r in found if r[2] is not None]


def items(d: Dialect, tenant: str, project: str, model: str, seqs: Sequence[int]) -> Op[dict[int, MemoryItem]]:
    """The items at ``seqs`` (this tenant/project's) whose vector of ``model`` is of their current
    content: a vector of an item since deleted, superseded or rewritten is not a hit."""
    if not seqs:
        return {}
    where, args = d.in_list(list(seqs), "bigint")
    # CROSS JOIN, vectors first: SQLite then looks each seq up by primary key in both tables. With a
    # plain JOIN and no statistics it walked the (tenant, project) index instead: every item of the
    # space, ~100 ms at 100k items. PostgreSQL plans a CROSS JOIN like any other.
    found = yield rows(
        f"SELECT {ITEM_COLUMNS} FROM memory_vectors v CROSS JOIN memory_items i WHERE v.seq{where}"
        " AND v.model = ? AND i.seq = v.seq AND v.digest = coalesce(i.digest, '')"
        f" AND i.tenant = ? AND i.project = ? AND {_LIVE}",
        *args,
        model,
        tenant,
        project,
    )
    return {int(r["seq"]): MemoryItem.from_row(r) for r in found}


def current(
    d: Dialect, tenant: str, project: str, model: str, seqs: Sequence[int], whole: Sequence[int]
) -> Op[tuple[dict[int, str], dict[int, MemoryItem]]]:
    """The ids of the items at ``seqs`` whose vector of ``model`` is of their current content (what
    ``items`` checks), and of those also at ``whole``, the items: one statement reads no content but
    theirs. A search's candidates are checked here, and only the few it may return are read whole
    (the check reads an index, the content is the weight: 0.09 ms against ``items``' 0.64 for 83
    candidates on SQLite), in one round trip."""
    if not seqs:
        return {}, {}
    where, args = d.in_list(list(seqs), "bigint")
    wanted, wanted_args = d.in_list(list(whole), "bigint") if whole else (" IS NULL", ())
    columns = ITEM_COLUMNS.replace("i.content", f"CASE WHEN i.seq{wanted} THEN i.content END AS content")
    found = yield rows(  # CROSS JOIN, vectors first: as in ``items``
        f"SELECT {columns} FROM memory_vectors v CROSS JOIN memory_items i WHERE v.seq"
        f"{where} AND v.model = ? AND i.seq = v.seq AND v.digest = coalesce(i.digest, '')"
        f" AND i.tenant = ? AND i.project = ? AND {_LIVE}",
        *wanted_args,
        *args,
        model,
        tenant,
        project,
    )
    ids = {int(r["seq"]): r["id"] for r in found}
    return ids, {int(r["seq"]): MemoryItem.from_row(r) for r in found if r["content"] is not None}


def count(d: Dialect, model: str) -> Op[tuple[int, int]]:
    """Items (live, of every space) and those embedded by ``model`` of their current content."""
    total = yield value(f"SELECT count(*) FROM memory_items i WHERE {_LIVE}")
    done = yield value(
        "SELECT count(*) FROM memory_vectors v JOIN memory_items i ON i.seq = v.seq"
        f" AND v.digest = coalesce(i.digest, '') WHERE v.model = ? AND {_LIVE}",
        model,
    )
    return int(total or 0), int(done or 0)


class CoreVectorStore:
    """Every space's vectors on a backend's ``Executor`` (unscoped: the embedding task serves all)."""

    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    async def pending(self, model: str, after: int, limit: int) -> list[Row]:
        return await self.ex.read(pending, model, after, limit)

    async def pending_of(self, model: str, ids: Sequence[str]) -> list[Row]:
        return await self.ex.read(pending_of, model, list(ids))

    async def save(self, model: str, made: Sequence[tuple[int, str, float, bytes]]) -> int:
        return await self.ex.write(save, model, list(made))

    async def count(self, model: str) -> tuple[int, int]:
        return await self.ex.read(count, model)
