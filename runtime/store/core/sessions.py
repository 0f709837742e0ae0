"""The session store (``runtime.sessions.store.SessionStore``), written once for both backends.

Chunks live in segments shared structurally (``runtime/store/core/tables/sessions.py``): a fork writes
one session row and its parent edges whatever the history's length; an append at a segment's tip extends
that segment in place, elsewhere it starts a segment of its own. The tip moves only if it is still where
the writer saw it (``UPDATE … WHERE tip = length``): on SQLite, whose writes are serial, it always is; on
PostgreSQL two appends at one tip may run at once, and the row lock makes the second wait, find the tip
moved and take a segment of its own.

What stays each backend's own (``Executor``, ``Dialect``): SQLite commits a small ``insert_on`` (a fork, a
short append) inline on the loop and reads a session's fields and a small page in place
(``Dialect.point_reads``); PostgreSQL re-runs an operation whose connection was lost before its commit
(so ``build`` may run twice) and reads a chain's chunks in one query (``session_rows``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from runtime.errors import ConflictError
from runtime.ids import new_id, now
from runtime.sessions.lineage import Graph
from runtime.sessions.model import SessionInfo, Usage
from runtime.sessions.store import (
    BranchTails,
    BuildOn,
    NewSession,
    StoredChunk,
    Stub,
    chunks_from,
    clip,
    holds,
    shared_start,
)
from runtime.store.core.dialect import Dialect
from runtime.store.core.id_search import ids_by_prefix
from runtime.store.core.session_rows import (
    CHUNK_COLUMNS,
    SCOPED,
    Scope,
    chain_rows,
    chars_of,
    info_columns,
    info_of,
    lineage_walk,
    missing,
    range_uids,
    scoped_chains,
    session_row,
)
from runtime.store.core.statements import Executor, Op, Scoped, many, none, one, rows, scoped, tuples

#: What is read in place on the event loop (``Executor.lookup``, where ``Dialect.point_reads``): a page of
#: at most 100 chunks, of at most 256k characters, of a session in at most 16 segments. Measured hot on
#: SQLite, a page costs about 5 us a chunk plus 1 us per 1,000 characters, and a segment 3 us: half a
#: millisecond of loop time at most (the MCP default page is 50 chunks). Anything larger uses a reader
#: thread. The page's size is bounded from the session row, so checking it reads no chunk: ``widest`` (its
#: longest chunk) times the page's chunks; for rows written before ``widest``, the session's whole ``chars``.
POINT_READ_CHUNKS = 100
POINT_READ_CHARS = 256_000
POINT_READ_SEGMENTS = 16

_SESSION_COLUMNS = (
    "id, tenant, project, op, segment_id, length, placement, usage, metadata, created_at, own_usage, chars, widest"
)
_INSERT_SESSION = f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES ({', '.join('?' * 13)})"
_INSERT_PARENTS = "INSERT INTO session_parents (child_id, ord, parent_id) VALUES (?,?,?)"
_INSERT_CHUNKS = (
    "INSERT INTO chunks (segment_id, idx, tenant, project, uid, kind, content, tool_calls, tool_call_id, name, trust)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)
_BASE = ", s.segment_id, s.chars, s.widest"  # what a session built on a base needs of it


# -- writes -------------------------------------------------------------------------------------
def insert(d: Dialect, scope: Scope, sessions: list[NewSession], stubs: Sequence[Stub] = ()) -> Op[list[SessionInfo]]:
    """Lineage stubs, then sessions, in one transaction."""
    for node, parents in stubs:  # ancestors of an imported session that live in another store
        made = yield none(
            f"{d.insert_ignore} INTO sessions (id, tenant, project, op, segment_id, length, placement, usage,"
            f" metadata, created_at, stub) VALUES (?,?,?,?,NULL,?,'{{}}','{{}}','{{}}',?,1){d.on_conflict_ignore}",
            node.id,
            *scope,
            node.op,
            node.length,
            node.created_at,
        )
        if made and parents:  # known already (as a session or a stub): keep what is there
            yield many(_INSERT_PARENTS, [(node.id, i, p) for i, p in enumerate(parents)])
    made = []
    for new in sessions:
        made.append((yield from insert_one(d, scope, new)))
    return made


def insert_on(d: Dialect, scope: Scope, base_id: str, build: BuildOn) -> Op[list[SessionInfo]]:
    row = yield from session_row(d, scope, base_id, info_columns(d) + _BASE)
    known = {base_id: row}  # read once, for every session built on it
    made = []
    for new in build(info_of(d, row)):
        made.append((yield from insert_one(d, scope, new, known)))
    return made


def insert_one(d: Dialect, scope: Scope, new: NewSession, known: dict[str, Any] | None = None) -> Op[SessionInfo]:
    """One session (a backend's run store also writes a run's output session with it, in its own commit)."""
    segment_id, length, chars, widest = None, 0, 0, 0
    if new.base_of is not None:
        row = (known or {}).get(new.base_of) or (yield from session_row(d, scope, new.base_of, "s.length" + _BASE))
        segment_id, length, chars, widest = row["segment_id"], row["length"], row["chars"], row["widest"]
    sizes = [chars_of(sc.chunk) for sc in new.chunks]
    if chars is not None:  # unknown for sessions written before it was kept: it stays unknown
        chars += sum(sizes)
    if widest is not None:  # likewise
        widest = max(widest, *sizes) if sizes else widest
    if new.chunks:
        segment_id, length = yield from _extend(d, scope, segment_id, length, new.chunks)
    session_id = new.id or new_id("ses")
    if new.id is not None:
        yield from _claim_id(d, scope, new.id)
    created_at = new.created_at if new.created_at is not None else now()
    own = new.own_usage if new.own_usage is not None else new.usage
    yield none(
        _INSERT_SESSION,
        session_id,
        *scope,
        new.op,
        segment_id,
        length,
        new.placement.model_dump_json(),
        new.usage.model_dump_json(),
        json.dumps(new.metadata, sort_keys=True),
        created_at,
        own.model_dump_json(),
        chars,
        widest,
    )
    if new.parents:
        yield many(_INSERT_PARENTS, [(session_id, i, p) for i, p in enumerate(new.parents)])
    tenant, project = scope
    return SessionInfo(
        id=session_id,
        parents=new.parents,
        op=new.op,
        length=length,
        placement=new.placement,
        usage=new.usage,
        metadata=new.metadata,
        created_at=created_at,
        tenant=tenant,
        project=project,
    )


def _extend(
    d: Dialect, scope: Scope, segment_id: str | None, length: int, chunks: tuple[StoredChunk, ...]
) -> Op[tuple[str, int]]:
    """Add chunks after ``(segment_id, length)``: in place at a segment's tip, else in a new segment."""
    end = length + len(chunks)
    target = segment_id
    if target is None or (yield none("UPDATE segments SET tip = ? WHERE id = ? AND tip = ?", end, target, length)) != 1:
        target = new_id("seg")
        yield none(
            "INSERT INTO segments (id, tenant, project, parent_id, parent_length, tip) VALUES (?,?,?,?,?,?)",
            target,
            *scope,
            segment_id,
            length,
            end,
        )
    yield many(
        _INSERT_CHUNKS,
        [
            (
                target,
                length + i,
                *scope,
                sc.uid,
                sc.chunk.kind,
                sc.chunk.content,
                None
                if sc.chunk.tool_calls is None
                else json.dumps([tc.model_dump(mode="json") for tc in sc.chunk.tool_calls]),
                sc.chunk.tool_call_id,
                sc.chunk.name,
                sc.chunk.trust,
            )
            for i, sc in enumerate(chunks)
        ],
    )
    return target, end


def _claim_id(d: Dialect, scope: Scope, session_id: str) -> Op[None]:
    """Make room for a session written under a given id (an import): a stub of it in this scope is
    replaced; an id used by any other record of this home is a conflict (ids are unique per home)."""
    row = yield one(f"SELECT tenant, project, stub FROM sessions WHERE id = ?{d.for_update}", session_id)
    if row is None:
        return
    if row["stub"] and (row["tenant"], row["project"]) == scope:
        yield none("DELETE FROM session_parents WHERE child_id = ?", session_id)
        yield none("DELETE FROM sessions WHERE id = ?", session_id)
        return
    raise ConflictError(
        f"session id {session_id} is already used in this home (in this or another tenant/project); "
        "import it into another home"
    )


# -- reads --------------------------------------------------------------------------------------
def info(d: Dialect, scope: Scope, session_id: str) -> Op[SessionInfo]:
    return info_of(d, (yield from session_row(d, scope, session_id, info_columns(d))))


def snapshot(
    d: Dialect, scope: Scope, session_id: str, offset: int, limit: int | None, bounded: bool
) -> Op[tuple[SessionInfo, list[StoredChunk]] | None]:
    """A session's fields and a page of its chunks; ``bounded``: ``None`` unless the page is known small
    from the session's row (its chunks times the longest one) and a chain of few segments."""
    row = yield from session_row(d, scope, session_id, info_columns(d) + _BASE)
    most = None
    if bounded:
        assert limit is not None
        bound = row["chars"] if row["widest"] is None else row["widest"] * limit
        if bound is None or bound > POINT_READ_CHARS:
            return None
        most = POINT_READ_SEGMENTS
    stop = row["length"] if limit is None else min(row["length"], offset + limit)
    found = yield from chain_rows(d, CHUNK_COLUMNS, row["segment_id"], row["length"], offset, stop, most)
    return None if found is None else (info_of(d, row), chunks_from(found))


def chunks(
    d: Dialect, scope: Scope, session_id: str, offset: int = 0, limit: int | None = None
) -> Op[list[StoredChunk]]:
    row = yield from session_row(d, scope, session_id, "s.segment_id, s.length")
    stop = row["length"] if limit is None else min(row["length"], offset + limit)
    return chunks_from((yield from chain_rows(d, CHUNK_COLUMNS, row["segment_id"], row["length"], offset, stop)) or [])


def uids(d: Dialect, scope: Scope, session_id: str) -> Op[list[str]]:
    row = yield from session_row(d, scope, session_id, "s.segment_id, s.length")
    found = yield from chain_rows(d, "uid", row["segment_id"], row["length"], 0, row["length"])
    return [r[0] for r in found or []]


def branch_tails(d: Dialect, scope: Scope, session_ids: Sequence[str]) -> Op[BranchTails]:
    """What a merge compares, from the branches' segment chains (see ``BranchTails``): costing the chunks
    past the segments all branches share and one index probe per such chunk."""
    ids = list(session_ids)
    found = yield rows(
        f"SELECT s.id, s.length FROM ({d.each()}) l CROSS JOIN sessions s WHERE s.id = l.value AND {SCOPED}",
        d.listed(ids),
        *scope,
    )
    lengths = {r[0]: r[1] for r in found}
    for sid in ids:
        if sid not in lengths:
            raise missing(scope, sid)
    by_id = yield from scoped_chains(d, scope, ids)
    chains = [by_id[sid] for sid in ids]
    start = shared_start(chains)
    reach = min(lengths[sid] for sid in ids[1:])
    wanted = [clip(chains[0], start, reach)] + [
        clip(c, start, lengths[sid]) for c, sid in zip(chains[1:], ids[1:], strict=True)
    ]
    tails = yield from range_uids(d, wanted)
    later = sorted({uid for tail in tails[1:] for uid in tail})
    held = set()
    if later:
        for uid, segment, idx in (
            yield tuples(f"SELECT uid, segment_id, idx FROM chunks WHERE uid IN ({d.each()})", d.listed(later))
        ):
            if holds(chains[0], segment, idx):
                held.add(uid)
    return BranchTails(start, tuple(tuple(t) for t in tails), frozenset(held))


def page(d: Dialect, scope: Scope, after: str | None, limit: int) -> Op[list[SessionInfo]]:
    found = yield rows(
        f"SELECT {info_columns(d)} FROM sessions s WHERE {SCOPED} AND s.id < ? ORDER BY s.id DESC LIMIT ?",
        *scope,
        after or "~",
        limit,
    )
    return [info_of(d, r) for r in found]


def lineage(d: Dialect, scope: Scope, session_id: str, depth: int, up: bool, down: bool, max_nodes: int) -> Op[Graph]:
    yield from session_row(d, scope, session_id, "s.id")
    return (yield from lineage_walk(d, scope, session_id, depth, up, down, max_nodes))


def ancestry(d: Dialect, scope: Scope, session_ids: Sequence[str]) -> Op[dict[str, Usage]]:
    """Every session in the history of ``session_ids`` (them included), each once, with its own usage.
    Stubs count zero; only parent edges of sessions in this scope are followed."""
    found = yield rows(
        f"WITH RECURSIVE up(id) AS ({d.each()} UNION SELECT p.parent_id"
        "  FROM session_parents p JOIN up ON p.child_id = up.id JOIN sessions c ON c.id = p.child_id"
        "  WHERE c.tenant = ? AND c.project = ?)"
        " SELECT s.id, s.own_usage FROM up JOIN sessions s ON s.id = up.id WHERE s.tenant = ? AND s.project = ?",
        d.listed(session_ids),
        *scope,
        *scope,
    )
    return {r["id"]: Usage.model_validate_json(r["own_usage"]) if r["own_usage"] else Usage() for r in found}


def session_ids(d: Dialect, scope: Scope, prefix: str, limit: int) -> Op[list[str]]:
    return (yield from ids_by_prefix(d, "sessions", *scope, prefix, limit, " AND stub = 0"))


class CoreSessionStore(Scoped[Scope]):
    """Sessions, segments of chunks and lineage edges, on whatever ``Executor`` a backend gives."""

    insert = scoped(insert, "write")
    info = scoped(info, "lookup")
    chunks = scoped(chunks)
    uids = scoped(uids)
    branch_tails = scoped(branch_tails)
    page = scoped(page)
    ids = scoped(session_ids)
    lineage = scoped(lineage)
    ancestry = scoped(ancestry)

    def __init__(self, ex: Executor, tenant: str, project: str) -> None:
        super().__init__(ex, (tenant, project))

    async def insert_on(self, base_id: str, build: BuildOn, *, small: bool = False) -> list[SessionInfo]:
        """``build`` runs inside the write (on SQLite's writer thread, or inline when ``small``): quick and pure."""
        return await self.ex.write(insert_on, self.scope, base_id, build, small=small)

    async def snapshot(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> tuple[SessionInfo, list[StoredChunk]]:
        """One consistent read; in place where the backend can and the page is small (``POINT_READ_*``)."""
        if self.ex.dialect.point_reads and limit is not None and limit <= POINT_READ_CHUNKS:
            found = await self.ex.lookup(snapshot, self.scope, session_id, offset, limit, True)
            if found is not None:
                return found
        done = await self.ex.read(snapshot, self.scope, session_id, offset, limit, False)
        assert done is not None  # an unbounded read always reads
        return done
