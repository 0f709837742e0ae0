"""How the session store reads: session rows into ``SessionInfo``, a segment chain's chunks, the lineage walk.

Both backends keep chunks in segments (``runtime/store/core/tables/sessions.py`` tells the layout): a
session is ``(segment, length)``; its chunks are the ranges ``(segment, lo, hi)`` of its segment chain.
The one real difference in reading them is what a statement costs. On PostgreSQL each is a round trip,
so a chain's chunks come from one query (``LATERAL``: a range scan per segment, which the planner cannot
turn into a scan of every chunk); SQLite has no ``LATERAL`` and a statement is a function call, so
there a chain is read a statement per segment (``Dialect.arrays`` tells which).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from runtime.errors import NotFoundError
from runtime.sessions.lineage import Graph, walk
from runtime.sessions.model import Chunk, LineageNode, SessionInfo
from runtime.sessions.store import Range, clip, info_from
from runtime.store.core.dialect import Dialect
from runtime.store.core.statements import Op, one, rows, tuples

Scope = tuple[str, str]  # tenant, project
SCOPED = "s.tenant = ? AND s.project = ? AND s.stub = 0"
CHUNK_COLUMNS = "uid, kind, content, tool_calls, tool_call_id, name, trust"
_LO = "CASE WHEN g.parent_id IS NULL THEN 0 ELSE g.parent_length END"

# PostgreSQL: a segment's chain, root last: each segment holds its chunks from ``parent_length`` (0 for a
# root) up to where its child continues.
CHAIN = f"""WITH RECURSIVE chain(id, parent_id, lo, hi) AS (
    SELECT g.id, g.parent_id, {_LO}, CAST(? AS INTEGER) FROM segments g WHERE g.id = ?
    UNION ALL
    SELECT g.id, g.parent_id, {_LO}, c.lo FROM chain c JOIN segments g ON g.id = c.parent_id
)"""
# Several sessions' chains as ``(session, segment, lo, hi)``, in one query (the ids are the one list parameter).
CHAINS = """WITH RECURSIVE chain(sid, id, parent_id, lo, hi) AS (
    SELECT s.id, g.id, g.parent_id, {lo}, s.length FROM ({each}) l CROSS JOIN sessions s
    JOIN segments g ON g.id = s.segment_id WHERE s.id = l.value AND {scoped}
    UNION ALL
    SELECT c.sid, g.id, g.parent_id, {lo}, c.lo FROM chain c JOIN segments g ON g.id = c.parent_id
) SELECT sid, id, lo, hi FROM chain ORDER BY sid, lo"""
# PostgreSQL: the uids of ranges ``(branch, segment, lo, hi)`` given as four arrays, each branch's in order.
RANGE_UIDS = """SELECT r.b, k.uid FROM unnest(?::int[], ?::text[], ?::int[], ?::int[]) AS r(b, seg, lo, hi)
CROSS JOIN LATERAL (
    SELECT k.uid, k.idx FROM chunks k WHERE k.segment_id = r.seg AND k.idx >= r.lo AND k.idx < r.hi OFFSET 0
) k ORDER BY r.b, k.idx"""


def chars_of(chunk: Chunk) -> int:
    calls = chunk.tool_calls or ()
    return len(chunk.content) + sum(len(c.function.name) + len(c.function.arguments) for c in calls)


@functools.cache
def info_columns(d: Dialect) -> str:
    parents = "SELECT p.parent_id FROM session_parents p WHERE p.child_id = s.id ORDER BY p.ord"
    return (
        "s.id, s.op, s.length, s.placement, s.usage, s.metadata, s.created_at, s.tenant, s.project, "
        + d.array_of(parents, "parent_id")
        + " AS parents"
    )


def info_of(d: Dialect, row: Any) -> SessionInfo:
    return info_from(row, d.unlist(row["parents"]))


def missing(scope: Scope, session_id: str) -> NotFoundError:
    return NotFoundError(
        f"no session {session_id!r} in {scope[0]}/{scope[1]}; "
        "list sessions with session_list (or `rath-mcp sessions list`) to find a valid id"
    )


def session_row(d: Dialect, scope: Scope, session_id: str, columns: str) -> Op[Any]:
    row = yield one(f"SELECT {columns} FROM sessions s WHERE s.id = ? AND {SCOPED}", session_id, *scope)
    if row is None:
        raise missing(scope, session_id)
    return row


@functools.cache
def _lateral(columns: str) -> str:
    return (
        CHAIN + f" SELECT {columns} FROM chain c CROSS JOIN LATERAL (SELECT * FROM chunks k"
        " WHERE k.segment_id = c.id AND k.idx >= greatest(c.lo, ?) AND k.idx < least(c.hi, ?) OFFSET 0) k"
        " ORDER BY k.idx"
    )


def chain_rows(
    d: Dialect, columns: str, segment: str | None, end: int, lo: int, hi: int, most: int | None = None
) -> Op[list[Any] | None]:
    """``columns`` of the chunks ``[lo, hi)`` of the chain ending at ``(segment, end)``, in order; ``None``
    when the chain has more than ``most`` segments (SQLite's bounded read in place)."""
    if segment is None or lo >= hi:
        return []
    if d.arrays:  # one round trip: the chain, then one range scan per segment of it (OFFSET 0 keeps it so)
        at_once: list[Any] = yield rows(_lateral(columns), end, segment, lo, hi)
        return at_once
    chain: list[Range] = []  # walked here, a point read per segment: cheaper on SQLite than a recursive query
    seg, stop = segment, end
    while seg is not None:
        if most is not None and len(chain) == most:
            return None
        parent, begin = yield one("SELECT parent_id, parent_length FROM segments WHERE id = ?", seg)
        chain.append((seg, begin if parent is not None else 0, stop))
        seg, stop = parent, begin
    found: list[Any] = []
    for seg, a, b in clip(chain[::-1], lo, hi):
        found += yield tuples(
            f"SELECT {columns} FROM chunks WHERE segment_id = ? AND idx >= ? AND idx < ? ORDER BY idx", seg, a, b
        )
    return found


def range_uids(d: Dialect, branches: list[list[Range]]) -> Op[list[list[str]]]:
    """The uids each branch's ranges cover, in order (on PostgreSQL in one query)."""
    out: list[list[str]] = [[] for _ in branches]
    if not d.arrays:
        for b, ranges in enumerate(branches):
            for seg, lo, hi in ranges:
                found = yield tuples(
                    "SELECT uid FROM chunks WHERE segment_id = ? AND idx >= ? AND idx < ? ORDER BY idx", seg, lo, hi
                )
                out[b] += [r[0] for r in found]
        return out
    flat = [(b, *r) for b, ranges in enumerate(branches) for r in ranges]
    if flat:
        for b, uid in (yield rows(RANGE_UIDS, *(list(column) for column in zip(*flat, strict=True)))):
            out[b].append(uid)
    return out


@functools.cache
def _edges(d: Dialect, up: bool, down: bool) -> str:
    """The parent edges of a frontier's sessions in this scope (``up``: where they are the child; ``down``:
    the parent), each once, ordered by child and rank. Driven from the list (``CROSS JOIN`` keeps SQLite
    from scanning the scope's sessions instead): an index probe per frontier session."""
    near = [col for col, wanted in (("p.child_id", up), ("p.parent_id", down)) if wanted]
    return (
        " UNION ".join(
            f"SELECT p.child_id, p.parent_id, p.ord FROM ({d.each()}) l CROSS JOIN session_parents p"
            f" CROSS JOIN sessions s WHERE {col} = l.value AND s.id = p.child_id AND s.tenant = ? AND s.project = ?"
            for col in near
        )
        + " ORDER BY 1, 3"
    )


def lineage_walk(
    d: Dialect, scope: Scope, session_id: str, depth: int, up: bool, down: bool, max_nodes: int
) -> Op[Graph]:
    """``walk`` over this scope's ``session_parents`` and ``sessions``: one query per level fetches the
    edges of the whole frontier, mirroring ``walk``'s own bounds (so it asks no more than it reads),
    then ``walk`` runs over what was fetched."""
    edges_sql = _edges(d, up, down)
    near = up + down
    parents: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    seen, frontier = {session_id}, [session_id]
    for _ in range(depth):
        for sid in frontier:
            parents.setdefault(sid, [])
            children.setdefault(sid, [])
        listed = d.listed(frontier)
        for child, parent, _rank in (yield rows(edges_sql, *[listed, *scope] * near)) if near else ():
            if child in parents and up:
                parents[child].append(parent)
            if parent in children and down:
                children[parent].append(child)
        nxt: list[str] = []
        for sid in frontier:
            for other in (parents[sid] if up else []) + (sorted(children[sid]) if down else []):
                if other not in seen and len(seen) < max_nodes:
                    seen.add(other)
                    nxt.append(other)
        frontier = nxt
        if not frontier:
            break
    found = yield rows(
        f"SELECT s.id, s.op, s.length, s.created_at, s.stub FROM ({d.each()}) l CROSS JOIN sessions s"
        " WHERE s.id = l.value AND s.tenant = ? AND s.project = ?",
        d.listed(sorted(seen)),
        *scope,
    )
    nodes = {
        r["id"]: LineageNode(
            id=r["id"], op=r["op"], length=r["length"], created_at=r["created_at"], stub=bool(r["stub"])
        )
        for r in found
    }
    return walk(
        session_id,
        depth,
        up=up,
        down=down,
        max_nodes=max_nodes,
        parents=lambda sid: parents.get(sid, []),
        children=lambda sid: sorted(children.get(sid, [])),
        node=nodes.get,
    )


@functools.cache
def _chains(d: Dialect) -> str:
    return CHAINS.format(lo=_LO, each=d.each(), scoped=SCOPED)


def scoped_chains(d: Dialect, scope: Scope, session_ids: Sequence[str]) -> Op[dict[str, list[Range]]]:
    """Each session's chain ranges, root first (in one query)."""
    sql = _chains(d)
    ranges: dict[str, list[Range]] = {sid: [] for sid in session_ids}
    for r in (yield rows(sql, d.listed(session_ids), *scope)):
        ranges[r[0]].append((r[1], r[2], r[3]))
    return ranges
