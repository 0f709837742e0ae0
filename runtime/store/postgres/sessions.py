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

from runtime.errors import ConflictError, NotFoundError
from runtime.ids import new_id, now
from runtime.sessions.model import LineageEdge, LineageNode, SessionInfo, Usage
from runtime.sessions.store import BranchTails, BuildOn, NewSession, Range, StoredChunk, Stub, clip, holds, shared_start
from runtime.store.postgres.database import PostgresDatabase, search_ids
from runtime.store.postgres.session_lineage import lineage_walk
from runtime.store.postgres.session_sql import (
    CHAINS,
    CHUNKS,
    INFO_COLUMNS,
    INSERT_CHUNKS,
    INSERT_PARENTS,
    INSERT_SESSION,
    LENGTHS,
    RANGE_UIDS,
    SCOPED,
    UIDS,
    WHERE_UIDS,
    chars_of,
    info_of,
    stored_chunks,
)


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

    async def insert_on(self, base_id: str, build: BuildOn, *, small: bool = False) -> list[SessionInfo]:
        """Read ``base_id`` and write what ``build`` makes of it in one transaction.

        ``build`` runs between the read and the writes, so it must be quick and pure; if it raises,
        nothing is written. It may run more than once (a transaction lost before its commit is re-run).
        """

        async def write(conn: asyncpg.Connection) -> list[SessionInfo]:
            row = await self._row(conn, base_id, INFO_COLUMNS + ", s.segment_id, s.chars")
            known = {base_id: row}  # what a session built on the base needs of it: read once
            return [await self._insert_one(conn, s, known) for s in build(info_of(row))]

        return await self.db.write(write)

    async def insert_in(self, conn: asyncpg.Connection, new: NewSession) -> SessionInfo:
        """Write one session inside a write another store holds (a run's last commit makes its output session)."""
        return await self._insert_one(conn, new)

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
            chars += sum(chars_of(sc.chunk) for sc in new.chunks)
        if new.chunks:
            segment_id, length = await self._extend(conn, segment_id, length, new.chunks)
        session_id = new.id or new_id("ses")
        if new.id is not None:
            await self._claim_id(conn, new.id)
        created_at = new.created_at if new.created_at is not None else now()
        await conn.execute(
            INSERT_SESSION,
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
            INSERT_CHUNKS,
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
                await conn.execute(INSERT_PARENTS, node.id, list(parents))

    # -- reads ----------------------------------------------------------------------------
    async def _row(self, conn: asyncpg.Connection, session_id: str, columns: str) -> asyncpg.Record:
        row: asyncpg.Record | None = await conn.fetchrow(
            f"SELECT {columns} FROM sessions s WHERE s.id = $1 AND {SCOPED}", session_id, self.tenant, self.project
        )
        if row is None:
            raise self._missing(session_id)
        return row

    async def _info_in(self, conn: asyncpg.Connection, session_id: str) -> SessionInfo:
        return info_of(await self._row(conn, session_id, INFO_COLUMNS))

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
        rows = await conn.fetch(CHUNKS, session_id, self.tenant, self.project, offset, stop)
        return stored_chunks(rows)

    async def uids(self, session_id: str) -> list[str]:
        """The identities of a session's chunks, in order (what merge compares; no content read)."""

        async def read(conn: asyncpg.Connection) -> list[str]:
            await self._row(conn, session_id, "s.id")
            return [r[0] for r in await conn.fetch(UIDS, session_id, self.tenant, self.project)]

        return await self.db.read(read)

    async def branch_tails(self, session_ids: Sequence[str]) -> BranchTails:
        """What a merge compares, from the branches' segment chains (see ``BranchTails``): three
        queries, costing the chunks past the segments all branches share and an index probe each."""

        async def read(conn: asyncpg.Connection) -> BranchTails:
            ids = list(session_ids)
            lengths = {r["id"]: r["length"] for r in await conn.fetch(LENGTHS, ids, self.tenant, self.project)}
            for sid in ids:
                if sid not in lengths:
                    raise self._missing(sid)
            ranges: dict[str, list[Range]] = {sid: [] for sid in ids}
            for r in await conn.fetch(CHAINS, ids, self.tenant, self.project):
                ranges[r["sid"]].append((r["id"], r["lo"], r["hi"]))
            chains = [ranges[sid] for sid in ids]
            start = shared_start(chains)
            reach = min(lengths[sid] for sid in ids[1:])
            wanted = [clip(chains[0], start, reach)] + [
                clip(c, start, lengths[sid]) for c, sid in zip(chains[1:], ids[1:], strict=True)
            ]
            tails = await _uids_in(conn, wanted)
            later = sorted({uid for tail in tails[1:] for uid in tail})
            rows = await conn.fetch(WHERE_UIDS, later) if later else []
            held = {r["uid"] for r in rows if holds(chains[0], r["segment_id"], r["idx"])}
            return BranchTails(start, tuple(tuple(t) for t in tails), frozenset(held))

        return await self.db.read(read)

    async def page(self, after: str | None, limit: int) -> list[SessionInfo]:
        async def read(conn: asyncpg.Connection) -> list[SessionInfo]:
            rows = await conn.fetch(
                f"SELECT {INFO_COLUMNS} FROM sessions s WHERE s.tenant = $1 AND s.project = $2 AND s.stub = 0"
                " AND s.id < $3 ORDER BY s.id DESC LIMIT $4",
                self.tenant,
                self.project,
                after or "~",
                limit,
            )
            return [info_of(r) for r in rows]

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
            return await lineage_walk(conn, (self.tenant, self.project), session_id, depth, up, down, max_nodes)

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


async def _uids_in(conn: asyncpg.Connection, ranges: list[list[Range]]) -> list[list[str]]:
    """The uids each branch's ranges cover, in order, in one query."""
    flat = [(b, *r) for b, branch in enumerate(ranges) for r in branch]
    out: list[list[str]] = [[] for _ in ranges]
    if flat:
        rows = await conn.fetch(RANGE_UIDS, *(list(column) for column in zip(*flat, strict=True)))
        for b, uid in rows:
            out[b].append(uid)
    return out
