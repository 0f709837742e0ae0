"""``PostgresSessionStore``: the ``SessionStore`` protocol on PostgreSQL, with the SQLite store's layout.

Chunks live in *segments* shared structurally, as on SQLite (``runtime.store.sqlite.sessions``): a
session is ``(segment, length)``, a segment continues its parent segment after ``parent_length``
chunks, and a chunk's ``idx`` is its position in every session that holds it. A fork writes one
session row and its parent edges whatever the history's length; an append at a segment's tip
extends that segment in place, elsewhere it starts a new segment of its own.

Every protocol call is one transaction (``PostgresDatabase.write``/``read``), written to need few
round trips: a session's chunks come from one recursive query over its segment chain, and a
write's chunks go in one ``INSERT ... SELECT unnest(...)``. Concurrency differs from SQLite, whose
writes are serial: two appends at the same tip may run at once, so the in-place extension is a
conditional ``UPDATE ... WHERE tip = length``; the loser, finding the tip moved, starts a segment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import asyncpg
from pydantic import TypeAdapter

from runtime.errors import ConflictError, NotFoundError
from runtime.ids import new_id, now
from runtime.sessions.lineage import walk
from runtime.sessions.model import Chunk, LineageEdge, LineageNode, Placement, SessionInfo, Usage
from runtime.sessions.store import BuildOn, NewSession, StoredChunk, Stub
from runtime.store.postgres.database import PostgresDatabase, search_ids


def _chars(chunk: Chunk) -> int:
    calls = chunk.tool_calls or ()
    return len(chunk.content) + sum(len(c.function.name) + len(c.function.arguments) for c in calls)


_INFO_COLUMNS = (
    "s.id, s.op, s.length, s.placement, s.usage, s.metadata, s.created_at, s.tenant, s.project,"
    " ARRAY(SELECT p.parent_id FROM session_parents p WHERE p.child_id = s.id ORDER BY p.ord) AS parents"
)
_SCOPED = "s.tenant = $2 AND s.project = $3 AND s.stub = 0"

# The index ranges ``[lo, hi)`` of each segment of a session's chain, newest segment first: a segment
# holds its chunks from ``parent_length`` (0 for a root segment) up to where its child continues.
_CHAIN = f"""
WITH RECURSIVE chain(id, parent_id, lo, hi) AS (
    SELECT g.id, g.parent_id, CASE WHEN g.parent_id IS NULL THEN 0 ELSE g.parent_length END, s.length
    FROM sessions s JOIN segments g ON g.id = s.segment_id
    WHERE s.id = $1 AND {_SCOPED}
    UNION ALL
    SELECT g.id, g.parent_id, CASE WHEN g.parent_id IS NULL THEN 0 ELSE g.parent_length END, c.lo
    FROM chain c JOIN segments g ON g.id = c.parent_id
)
"""
_CHUNKS = (
    _CHAIN + "SELECT k.uid, k.kind, k.content, k.tool_calls, k.tool_call_id, k.name FROM chain c"
    " JOIN chunks k ON k.segment_id = c.id AND k.idx >= greatest(c.lo, $4) AND k.idx < least(c.hi, $5)"
    " ORDER BY k.idx"
)
_UIDS = (
    _CHAIN + "SELECT k.uid FROM chain c"
    " JOIN chunks k ON k.segment_id = c.id AND k.idx >= c.lo AND k.idx < c.hi ORDER BY k.idx"
)
_INSERT_CHUNKS = """
INSERT INTO chunks (segment_id, idx, tenant, project, uid, kind, content, tool_calls, tool_call_id, name)
SELECT $1, $2 + u.ord - 1, $3, $4, u.uid, u.kind, u.content, u.tool_calls, u.tool_call_id, u.name
FROM unnest($5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
    WITH ORDINALITY AS u(uid, kind, content, tool_calls, tool_call_id, name, ord)
"""
_INSERT_PARENTS = (
    "INSERT INTO session_parents (child_id, ord, parent_id)"
    " SELECT $1, u.ord - 1, u.parent FROM unnest($2::text[]) WITH ORDINALITY AS u(parent, ord)"
)
# A session and its parent edges in one statement (one round trip); the edges' foreign key is checked
# at the statement's end, when the session row is there.
_INSERT_SESSION = (
    "WITH s AS (INSERT INTO sessions (id, tenant, project, op, segment_id, length, placement, usage, metadata,"
    " created_at, own_usage, chars) VALUES ($1,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13) RETURNING id) "
    + _INSERT_PARENTS.replace("$1", "(SELECT id FROM s)")
)


def _info(row: asyncpg.Record) -> SessionInfo:
    return SessionInfo(
        id=row["id"],
        parents=tuple(row["parents"]),
        op=row["op"],
        length=row["length"],
        placement=Placement.model_validate_json(row["placement"]),
        usage=Usage.model_validate_json(row["usage"]),
        metadata=json.loads(row["metadata"]),
        created_at=row["created_at"],
        tenant=row["tenant"],
        project=row["project"],
    )


#: Chunks are validated a list at a time: one call into pydantic-core instead of one per chunk.
_CHUNK_LIST = TypeAdapter(list[Chunk])


def _stored_chunks(rows: list[asyncpg.Record]) -> list[StoredChunk]:
    fields = [
        {
            "kind": kind,
            "content": content,
            "tool_calls": json.loads(tool_calls) if tool_calls is not None else None,
            "tool_call_id": tool_call_id,
            "name": name,
        }
        for _, kind, content, tool_calls, tool_call_id, name in rows
    ]
    return [StoredChunk(row[0], chunk) for row, chunk in zip(rows, _CHUNK_LIST.validate_python(fields), strict=True)]


class PostgresSessionStore:
    """Sessions, segments of chunks and lineage edges in a PostgreSQL database."""

    def __init__(self, db: PostgresDatabase, tenant: str, project: str) -> None:
        self.db = db
        self.tenant = tenant
        self.project = project

    def _missing(self, session_id: str) -> NotFoundError:
        return NotFoundError(
            f"no session {session_id!r} in {self.tenant}/{self.project}; "
            "list sessions with session_list (or `rath-mcp sessions list`) to find a valid id"
        )

    # -- writes ---------------------------------------------------------------------------
    async def insert(self, sessions: list[NewSession], stubs: Sequence[Stub] = ()) -> list[SessionInfo]:
        """Write lineage stubs, then sessions, in one transaction (all or none) and return the sessions."""

        async def write(conn: asyncpg.Connection) -> list[SessionInfo]:
            await self._insert_stubs(conn, stubs)
            return [await self._insert_one(conn, s) for s in sessions]

        return await self.db.write(write)

    async def insert_on(self, base_id: str, build: BuildOn) -> list[SessionInfo]:
        """Read ``base_id`` and write what ``build`` makes of it in one transaction.

        ``build`` runs between the read and the writes, so it must be quick and pure; if it raises,
        nothing is written. It may run more than once (a transaction lost before its commit is re-run).
        """

        async def write(conn: asyncpg.Connection) -> list[SessionInfo]:
            row = await self._row(conn, base_id, _INFO_COLUMNS + ", s.segment_id, s.chars")
            known = {base_id: row}  # what a session built on the base needs of it: read once
            return [await self._insert_one(conn, s, known) for s in build(_info(row))]

        return await self.db.write(write)

    async def _insert_one(
        self, conn: asyncpg.Connection, new: NewSession, known: dict[str, asyncpg.Record] | None = None
    ) -> SessionInfo:
        segment_id, length, chars = None, 0, 0
        if new.base_of is not None:
            row = (known or {}).get(new.base_of) or await self._row(
                conn, new.base_of, "s.segment_id, s.length, s.chars"
            )
            segment_id, length, chars = row["segment_id"], row["length"], row["chars"]
        if chars is not None:
            chars += sum(_chars(sc.chunk) for sc in new.chunks)
        if new.chunks:
            segment_id, length = await self._extend(conn, segment_id, length, new.chunks)
        session_id = new.id or new_id("ses")
        if new.id is not None:
            await self._claim_id(conn, new.id)
        created_at = new.created_at if new.created_at is not None else now()
        await conn.execute(
            _INSERT_SESSION,
            session_id,
            list(new.parents),
            self.tenant,
            self.project,
            new.op,
            segment_id,
            length,
            new.placement.model_dump_json(),
            new.usage.model_dump_json(),
            json.dumps(new.metadata, sort_keys=True),
            created_at,
            (new.own_usage if new.own_usage is not None else new.usage).model_dump_json(),
            chars,
        )
        return SessionInfo(
            id=session_id,
            parents=new.parents,
            op=new.op,
            length=length,
            placement=new.placement,
            usage=new.usage,
            metadata=new.metadata,
            created_at=created_at,
            tenant=self.tenant,
            project=self.project,
        )

    async def _extend(
        self, conn: asyncpg.Connection, segment_id: str | None, length: int, chunks: tuple[StoredChunk, ...]
    ) -> tuple[str, int]:
        """Add chunks after ``(segment_id, length)``: in place at a segment's tip, else in a new segment.

        The tip moves only if it is still at ``length`` (the row lock makes a concurrent append wait,
        then see the moved tip and take a segment of its own)."""
        end = length + len(chunks)
        target = segment_id
        if (
            segment_id is None
            or await conn.execute("UPDATE segments SET tip = $2 WHERE id = $1 AND tip = $3", segment_id, end, length)
            != "UPDATE 1"
        ):
            target = new_id("seg")
            await conn.execute(
                "INSERT INTO segments (id, tenant, project, parent_id, parent_length, tip) VALUES ($1,$2,$3,$4,$5,$6)",
                target,
                self.tenant,
                self.project,
                segment_id,
                length,
                end,
            )
        await conn.execute(
            _INSERT_CHUNKS,
            target,
            length,
            self.tenant,
            self.project,
            [sc.uid for sc in chunks],
            [sc.chunk.kind for sc in chunks],
            [sc.chunk.content for sc in chunks],
            [
                json.dumps([tc.model_dump(mode="json") for tc in sc.chunk.tool_calls])
                if sc.chunk.tool_calls is not None
                else None
                for sc in chunks
            ],
            [sc.chunk.tool_call_id for sc in chunks],
            [sc.chunk.name for sc in chunks],
        )
        assert target is not None
        return target, end

    async def _claim_id(self, conn: asyncpg.Connection, session_id: str) -> None:
        """Make room for a session written under a given id (an import): a stub of it in this scope is
        replaced; an id used by any other record of this store is a conflict (ids are unique per store)."""
        row = await conn.fetchrow("SELECT tenant, project, stub FROM sessions WHERE id = $1 FOR UPDATE", session_id)
        if row is None:
            return
        if row["stub"] and (row["tenant"], row["project"]) == (self.tenant, self.project):
            await conn.execute(
                "WITH gone AS (DELETE FROM session_parents WHERE child_id = $1) DELETE FROM sessions WHERE id = $1",
                session_id,
            )
            return
        raise ConflictError(
            f"session id {session_id} is already used in this store (in this or another tenant/project); "
            "import it into another store"
        )

    async def _insert_stubs(self, conn: asyncpg.Connection, nodes: Sequence[Stub]) -> None:
        """Record lineage-only nodes: ancestors of an imported session that live in another store."""
        for node, parents in nodes:
            made = await conn.fetchval(
                "INSERT INTO sessions (id, tenant, project, op, segment_id, length, placement, usage,"
                " metadata, created_at, stub) VALUES ($1,$2,$3,$4,NULL,$5,'{}','{}','{}',$6,1)"
                " ON CONFLICT (id) DO NOTHING RETURNING id",
                node.id,
                self.tenant,
                self.project,
                node.op,
                node.length,
                node.created_at,
            )
            if made is not None and parents:  # known already (as a session or a stub): keep what is there
                await conn.execute(_INSERT_PARENTS, node.id, list(parents))

    # -- reads ----------------------------------------------------------------------------
    async def _row(self, conn: asyncpg.Connection, session_id: str, columns: str) -> asyncpg.Record:
        row: asyncpg.Record | None = await conn.fetchrow(
            f"SELECT {columns} FROM sessions s WHERE s.id = $1 AND {_SCOPED}", session_id, self.tenant, self.project
        )
        if row is None:
            raise self._missing(session_id)
        return row

    async def _info_in(self, conn: asyncpg.Connection, session_id: str) -> SessionInfo:
        return _info(await self._row(conn, session_id, _INFO_COLUMNS))

    async def info(self, session_id: str) -> SessionInfo:
        return await self.db.read(lambda conn: self._info_in(conn, session_id))

    async def snapshot(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> tuple[SessionInfo, list[StoredChunk]]:
        """A session's fields and a page of its chunks from one consistent read."""

        async def read(conn: asyncpg.Connection) -> tuple[SessionInfo, list[StoredChunk]]:
            info = await self._info_in(conn, session_id)
            return info, await self._chunks(conn, session_id, offset, limit, info.length)

        return await self.db.read(read)

    async def chunks(self, session_id: str, offset: int = 0, limit: int | None = None) -> list[StoredChunk]:
        async def read(conn: asyncpg.Connection) -> list[StoredChunk]:
            length = (await self._row(conn, session_id, "s.length"))["length"]
            return await self._chunks(conn, session_id, offset, limit, length)

        return await self.db.read(read)

    async def _chunks(
        self, conn: asyncpg.Connection, session_id: str, offset: int, limit: int | None, length: int
    ) -> list[StoredChunk]:
        stop = length if limit is None else min(length, offset + limit)
        if offset >= stop:
            return []
        rows = await conn.fetch(_CHUNKS, session_id, self.tenant, self.project, offset, stop)
        return _stored_chunks(rows)

    async def uids(self, session_id: str) -> list[str]:
        """The identities of a session's chunks, in order (what merge compares; no content read)."""

        async def read(conn: asyncpg.Connection) -> list[str]:
            await self._row(conn, session_id, "s.id")
            return [r[0] for r in await conn.fetch(_UIDS, session_id, self.tenant, self.project)]

        return await self.db.read(read)

    async def page(self, after: str | None, limit: int) -> list[SessionInfo]:
        async def read(conn: asyncpg.Connection) -> list[SessionInfo]:
            rows = await conn.fetch(
                f"SELECT {_INFO_COLUMNS} FROM sessions s WHERE s.tenant = $1 AND s.project = $2 AND s.stub = 0"
                " AND s.id < $3 ORDER BY s.id DESC LIMIT $4",
                self.tenant,
                self.project,
                after or "~",
                limit,
            )
            return [_info(r) for r in rows]

        return await self.db.read(read)

    async def ids(self, prefix: str, limit: int) -> list[str]:
        """Ids of sessions starting with ``prefix``, newest first."""
        return await search_ids(self.db, "sessions", self.tenant, self.project, prefix, limit, also=" AND stub = 0")

    async def lineage(
        self, session_id: str, depth: int, *, up: bool, down: bool, max_nodes: int
    ) -> tuple[list[LineageNode], list[LineageEdge], bool]:
        """Nodes and edges within ``depth`` steps of a session (at most ``max_nodes``), and whether
        the walk was cut short; towards ancestors and/or descendants."""

        async def read(conn: asyncpg.Connection) -> tuple[list[LineageNode], list[LineageEdge], bool]:
            await self._row(conn, session_id, "s.id")
            return await _walk(conn, (self.tenant, self.project), session_id, depth, up, down, max_nodes)

        return await self.db.read(read)

    async def ancestry(self, session_ids: Sequence[str]) -> dict[str, Usage]:
        """Every session in the history of ``session_ids`` (them included), each once: its own usage.

        Lineage stubs count with zero; the walk follows only parent edges of sessions in this
        tenant/project, so another scope's lineage is never read.
        """

        async def read(conn: asyncpg.Connection) -> dict[str, Usage]:
            rows = await conn.fetch(
                'WITH RECURSIVE up(id) AS (SELECT unnest($1::text[]) COLLATE "C" UNION SELECT p.parent_id'
                "  FROM session_parents p JOIN up ON p.child_id = up.id JOIN sessions c ON c.id = p.child_id"
                "  WHERE c.tenant = $2 AND c.project = $3)"
                " SELECT s.id, s.own_usage FROM up JOIN sessions s ON s.id = up.id"
                " WHERE s.tenant = $2 AND s.project = $3",
                list(session_ids),
                self.tenant,
                self.project,
            )
            return {r["id"]: Usage.model_validate_json(r["own_usage"]) if r["own_usage"] else Usage() for r in rows}

        return await self.db.read(read)


_EDGES = """
SELECT p.child_id, p.parent_id FROM session_parents p JOIN sessions s ON s.id = p.child_id
WHERE s.tenant = $2 AND s.project = $3
  AND ((p.child_id = ANY($1::text[]) AND $4) OR (p.parent_id = ANY($1::text[]) AND $5))
ORDER BY p.child_id, p.ord
"""


async def _walk(
    conn: asyncpg.Connection,
    scope: tuple[str, str],
    session_id: str,
    depth: int,
    up: bool,
    down: bool,
    max_nodes: int,
) -> tuple[list[LineageNode], list[LineageEdge], bool]:
    """``walk`` over this scope's ``session_parents`` and ``sessions``: one query per level fetches
    the edges of the whole frontier, mirroring ``walk``'s own bounds (so it asks no more than it reads),
    then ``walk`` runs over what was fetched, giving exactly the SQLite store's graph."""
    parents: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    seen, frontier = {session_id}, [session_id]
    for _ in range(depth):
        for sid in frontier:
            parents.setdefault(sid, [])
            children.setdefault(sid, [])
        for child, parent in await conn.fetch(_EDGES, frontier, *scope, up, down):
            if child in parents and up:
                parents[child].append(parent)
            if parent in children and down:
                children[parent].append(child)
        nxt: list[str] = []
        for sid in frontier:
            near = (parents[sid] if up else []) + (sorted(children[sid]) if down else [])
            for other in near:
                if other not in seen and len(seen) < max_nodes:
                    seen.add(other)
                    nxt.append(other)
        frontier = nxt
        if not frontier:
            break
    nodes = {
        r["id"]: LineageNode(
            id=r["id"], op=r["op"], length=r["length"], created_at=r["created_at"], stub=bool(r["stub"])
        )
        for r in await conn.fetch(
            "SELECT id, op, length, created_at, stub FROM sessions WHERE id = ANY($1::text[])"
            " AND tenant = $2 AND project = $3",
            list(seen),
            *scope,
        )
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
