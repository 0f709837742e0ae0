"""``SQLiteSessionStore``: the ``SessionStore`` protocol on the embedded SQLite database.

The store knows rows and segments; the semantics of fork, merge and lineage live in
``runtime.sessions.service`` so that every store implementation shares them.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from runtime.errors import ConflictError, NotFoundError
from runtime.ids import new_id, now
from runtime.sessions.model import LineageEdge, LineageNode, SessionInfo, Usage
from runtime.sessions.store import BranchTails, BuildOn, NewSession, Range, StoredChunk, Stub, clip, holds, shared_start
from runtime.store.sqlite.database import SQLiteDatabase, search_ids
from runtime.store.sqlite.session_rows import (
    INFO_COLUMNS,
    SELECT_INFO,
    chars_of,
    info_of,
    lineage_walk,
    stored_chunks,
    uids_in,
)

#: What is read in place on the event loop (``SQLiteDatabase.lookup``): a page of at most 100 chunks, of at
#: most 256k characters, of a session in at most 16 segments. Measured hot, a page costs about 5 us a chunk
#: plus 1 us per 1,000 characters, and a segment 3 us: half a millisecond of loop time at most (the MCP
#: default page is 50 chunks). Anything larger uses a reader thread. The page's size is bounded from the
#: session row, so checking it reads no chunk: ``widest`` (its longest chunk, 0005) times the page's
#: chunks; for rows written before 0005, the session's whole ``chars``. So a page of a long session of
#: short chunks is read in place, as cheaply as a page of a short one.
POINT_READ_CHUNKS = 100
POINT_READ_CHARS = 256_000
POINT_READ_SEGMENTS = 16


class SQLiteSessionStore:
    """Sessions, segments of chunks and lineage edges in the embedded SQLite database."""

    def __init__(self, db: SQLiteDatabase, tenant: str, project: str) -> None:
        self.db = db
        self.tenant = tenant
        self.project = project

    # -- writes ---------------------------------------------------------------------------
    async def insert(self, sessions: list[NewSession], stubs: Sequence[Stub] = ()) -> list[SessionInfo]:
        """Write lineage stubs, then sessions, in one transaction (all or none) and return the sessions."""

        def write(conn: sqlite3.Connection) -> list[SessionInfo]:
            self._insert_stubs(conn, stubs)
            return [self._insert_one(conn, s) for s in sessions]

        return await self.db.write(write)

    async def insert_on(self, base_id: str, build: BuildOn, *, small: bool = False) -> list[SessionInfo]:
        """Read ``base_id`` and write what ``build`` makes of it in one transaction (one thread hop; none
        when ``small`` and alone: ``SQLiteDatabase.write``).

        ``build`` runs on the writer's thread, so it must be quick and pure; if it raises, nothing is written.
        """

        def write(conn: sqlite3.Connection) -> list[SessionInfo]:
            row = self._row(conn, base_id, INFO_COLUMNS + ", s.segment_id, s.chars, s.widest")
            known = {base_id: row}  # what a session built on the base needs of it: read once
            return [self._insert_one(conn, s, known) for s in build(info_of(row))]

        return await self.db.write(write, small=small)

    def insert_in(self, conn: sqlite3.Connection, new: NewSession) -> SessionInfo:
        """Write one session inside a write another store holds (a run's last commit makes its output session)."""
        return self._insert_one(conn, new)

    def _insert_one(
        self, conn: sqlite3.Connection, new: NewSession, known: dict[str, sqlite3.Row] | None = None
    ) -> SessionInfo:
        segment_id, length, chars, widest = None, 0, 0, 0
        if new.base_of is not None:
            row = (known or {}).get(new.base_of) or self._row(conn, new.base_of, "segment_id, length, chars, widest")
            segment_id, length, chars, widest = row["segment_id"], row["length"], row["chars"], row["widest"]
        sizes = [chars_of(sc.chunk) for sc in new.chunks]
        if chars is not None:  # unknown for sessions written before 0003: it stays unknown
            chars += sum(sizes)
        if widest is not None:  # likewise before 0005
            widest = max(widest, *sizes) if sizes else widest
        if new.chunks:
            segment_id, length = self._extend(conn, segment_id, length, new.chunks)
        session_id = new.id or new_id("ses")
        if new.id is not None:
            self._claim_id(conn, new.id)
        created_at = new.created_at if new.created_at is not None else now()
        conn.execute(
            "INSERT INTO sessions (id, tenant, project, op, segment_id, length, placement, usage, metadata,"
            " created_at, own_usage, chars, widest) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                session_id,
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
                widest,
            ),
        )
        conn.executemany(
            "INSERT INTO session_parents (child_id, ord, parent_id) VALUES (?,?,?)",
            [(session_id, i, p) for i, p in enumerate(new.parents)],
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

    def _extend(
        self, conn: sqlite3.Connection, segment_id: str | None, length: int, chunks: tuple[StoredChunk, ...]
    ) -> tuple[str, int]:
        """Add chunks after ``(segment_id, length)``: in place at a segment's tip, else in a new segment."""
        at_tip = False
        if segment_id is not None:
            tip = conn.execute("SELECT tip FROM segments WHERE id = ?", (segment_id,)).fetchone()[0]
            at_tip = tip == length
        end = length + len(chunks)
        if at_tip:
            assert segment_id is not None
            conn.execute("UPDATE segments SET tip = ? WHERE id = ?", (end, segment_id))
            target = segment_id
        else:
            target = new_id("seg")
            conn.execute(
                "INSERT INTO segments (id, tenant, project, parent_id, parent_length, tip) VALUES (?,?,?,?,?,?)",
                (target, self.tenant, self.project, segment_id, length, end),
            )
        conn.executemany(
            "INSERT INTO chunks (segment_id, idx, tenant, project, uid, kind, content, tool_calls,"
            " tool_call_id, name) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    target,
                    length + i,
                    self.tenant,
                    self.project,
                    sc.uid,
                    sc.chunk.kind,
                    sc.chunk.content,
                    json.dumps([tc.model_dump(mode="json") for tc in sc.chunk.tool_calls])
                    if sc.chunk.tool_calls is not None
                    else None,
                    sc.chunk.tool_call_id,
                    sc.chunk.name,
                )
                for i, sc in enumerate(chunks)
            ],
        )
        return target, end

    def _claim_id(self, conn: sqlite3.Connection, session_id: str) -> None:
        """Make room for a session written under a given id (an import).

        A stub of it in this scope (known so far only from lineage) is replaced; an id used by
        any other record of this home is a conflict, since ids are unique per home.
        """
        row = conn.execute("SELECT tenant, project, stub FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            return
        if row["stub"] and (row["tenant"], row["project"]) == (self.tenant, self.project):
            conn.execute("DELETE FROM session_parents WHERE child_id = ?", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            return
        raise ConflictError(
            f"session id {session_id} is already used in this home (in this or another tenant/project); "
            "import it into another home"
        )

    def _insert_stubs(self, conn: sqlite3.Connection, nodes: Sequence[Stub]) -> None:
        """Record lineage-only nodes: ancestors of an imported session that live in another store."""
        for node, parents in nodes:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (node.id,)).fetchone():
                continue  # known already (as a session or a stub): keep what is there
            conn.execute(
                "INSERT INTO sessions (id, tenant, project, op, segment_id, length, placement, usage,"
                " metadata, created_at, stub) VALUES (?,?,?,?,NULL,?,?,?,?,?,1)",
                (node.id, self.tenant, self.project, node.op, node.length, "{}", "{}", "{}", node.created_at),
            )
            conn.executemany(
                "INSERT INTO session_parents (child_id, ord, parent_id) VALUES (?,?,?)",
                [(node.id, i, p) for i, p in enumerate(parents)],
            )

    # -- reads ----------------------------------------------------------------------------
    def _row(self, conn: sqlite3.Connection, session_id: str, columns: str) -> sqlite3.Row:
        row: sqlite3.Row | None = conn.execute(
            f"SELECT {columns} FROM sessions s WHERE s.id = ? AND s.tenant = ? AND s.project = ? AND s.stub = 0",
            (session_id, self.tenant, self.project),
        ).fetchone()
        if row is None:
            raise NotFoundError(
                f"no session {session_id!r} in {self.tenant}/{self.project}; "
                "list sessions with session_list (or `rath-mcp sessions list`) to find a valid id"
            )
        return row

    def _info_in(self, conn: sqlite3.Connection, session_id: str) -> SessionInfo:
        return info_of(self._row(conn, session_id, INFO_COLUMNS))

    async def info(self, session_id: str) -> SessionInfo:
        return await self.db.lookup(lambda conn: self._info_in(conn, session_id), small=lambda conn: True)

    async def snapshot(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> tuple[SessionInfo, list[StoredChunk]]:
        """A session's fields and a page of its chunks from one consistent read: in place when it is
        small (a page of at most ``POINT_READ_CHUNKS`` chunks and ``POINT_READ_CHARS`` characters, of a
        session in at most ``POINT_READ_SEGMENTS`` segments), else on a reader thread."""

        def read(conn: sqlite3.Connection) -> tuple[SessionInfo, list[StoredChunk]]:
            return self._info_in(conn, session_id), self._chunks(conn, session_id, offset, limit)

        def read_if_small(conn: sqlite3.Connection) -> tuple[SessionInfo, list[StoredChunk]] | None:
            """The page, or ``None`` when it is not known small from the session's row: the page's text at
            most (its chunks times the longest one), and the session's chain of segments (walked at most
            so far). The row and the chain are read once, for the check and the page both."""
            assert limit is not None
            row = self._row(conn, session_id, INFO_COLUMNS + ", s.segment_id, s.chars, s.widest")
            bound = row["chars"] if row["widest"] is None else row["widest"] * limit
            if bound is None or bound > POINT_READ_CHARS:
                return None
            chain = self._chain_of(conn, row["segment_id"], row["length"], most=POINT_READ_SEGMENTS)
            if chain is None:
                return None
            page = clip(chain, offset, min(row["length"], offset + limit))
            return info_of(row), self._chunks_in(conn, page)

        if limit is None or limit > POINT_READ_CHUNKS:
            return await self.db.read(read)
        found = await self.db.lookup(read_if_small, small=_always)
        return found if found is not None else await self.db.read(read)

    async def chunks(self, session_id: str, offset: int = 0, limit: int | None = None) -> list[StoredChunk]:
        return await self.db.read(lambda conn: self._chunks(conn, session_id, offset, limit))

    def _chunks(self, conn: sqlite3.Connection, session_id: str, offset: int, limit: int | None) -> list[StoredChunk]:
        return self._chunks_in(conn, self._ranges(conn, session_id, offset, limit))

    def _chunks_in(self, conn: sqlite3.Connection, ranges: list[Range]) -> list[StoredChunk]:
        rows: list[tuple[Any, ...]] = []
        cursor = conn.cursor()
        cursor.row_factory = None  # plain tuples: a named Row per chunk costs more than the query
        for segment, lo, hi in ranges:
            rows += cursor.execute(
                "SELECT uid, kind, content, tool_calls, tool_call_id, name FROM chunks"
                " WHERE segment_id = ? AND idx >= ? AND idx < ? ORDER BY idx",
                (segment, lo, hi),
            )
        return stored_chunks(rows)

    async def uids(self, session_id: str) -> list[str]:
        """The identities of a session's chunks, in order (no content read)."""
        return await self.db.read(lambda conn: uids_in(conn, self._ranges(conn, session_id, 0, None)))

    async def branch_tails(self, session_ids: Sequence[str]) -> BranchTails:
        """What a merge compares, from the branches' segment chains (see ``BranchTails``): one read,
        costing the chunks past the segments all branches share and one index probe per such chunk."""

        def read(conn: sqlite3.Connection) -> BranchTails:
            chains = [self._chain(conn, sid) for sid in session_ids]
            start = shared_start([ranges for _, ranges in chains])
            reach = min(length for length, _ in chains[1:])
            tails = [uids_in(conn, clip(chains[0][1], start, reach))]
            tails += [uids_in(conn, clip(ranges, start, length)) for length, ranges in chains[1:]]
            later = sorted({uid for tail in tails[1:] for uid in tail})
            rows = conn.execute(
                "SELECT uid, segment_id, idx FROM chunks WHERE uid IN (SELECT value FROM json_each(?))",
                (json.dumps(later),),
            ).fetchall()
            first = chains[0][1]
            held = {uid for uid, segment, idx in rows if holds(first, segment, idx)}
            return BranchTails(start, tuple(tuple(t) for t in tails), frozenset(held))

        return await self.db.read(read)

    def _chain(self, conn: sqlite3.Connection, session_id: str) -> tuple[int, list[tuple[str, int, int]]]:
        """A session's length and its segment chain's ranges, root first."""
        length = self._row(conn, session_id, "length")["length"]
        return length, self._ranges(conn, session_id, 0, None)

    def _ranges(
        self, conn: sqlite3.Connection, session_id: str, offset: int, limit: int | None
    ) -> list[tuple[str, int, int]]:
        """``(segment, lo, hi)`` index ranges holding chunks ``[offset, offset+limit)`` of a session, in order."""
        row = self._row(conn, session_id, "segment_id, length")
        stop_at = row["length"] if limit is None else min(row["length"], offset + limit)
        chain = self._chain_of(conn, row["segment_id"], row["length"])
        assert chain is not None  # walked to its root
        return clip(chain, offset, stop_at)

    def _chain_of(
        self, conn: sqlite3.Connection, segment: str | None, end: int, *, most: int | None = None
    ) -> list[Range] | None:
        """``(segment, lo, hi)`` of the chain that ends at ``(segment, end)``, root first; ``None`` when it
        has more than ``most`` segments."""
        chain: list[Range] = []
        while segment is not None:
            if most is not None and len(chain) == most:
                return None
            seg = conn.execute("SELECT parent_id, parent_length FROM segments WHERE id = ?", (segment,)).fetchone()
            begin = seg["parent_length"] if seg["parent_id"] is not None else 0
            chain.append((segment, begin, end))
            segment, end = seg["parent_id"], seg["parent_length"]
        return chain[::-1]

    async def page(self, after: str | None, limit: int) -> list[SessionInfo]:
        def read(conn: sqlite3.Connection) -> list[SessionInfo]:
            rows = conn.execute(
                SELECT_INFO + " WHERE s.tenant = ? AND s.project = ? AND s.stub = 0 AND s.id < ?"
                " ORDER BY s.id DESC LIMIT ?",
                (self.tenant, self.project, after or "~", limit),
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

        def read(conn: sqlite3.Connection) -> tuple[list[LineageNode], list[LineageEdge], bool]:
            self._row(conn, session_id, "id")
            scope = (self.tenant, self.project)
            return lineage_walk(conn, scope, session_id, depth, up=up, down=down, max_nodes=max_nodes)

        return await self.db.read(read)

    async def ancestry(self, session_ids: Sequence[str]) -> dict[str, Usage]:
        """Every session in the history of ``session_ids`` (them included), each once: its own usage.

        Lineage stubs count with zero; the walk follows only parent edges of sessions in this
        tenant/project, so another scope's lineage is never read.
        """

        def read(conn: sqlite3.Connection) -> dict[str, Usage]:
            rows = conn.execute(
                "WITH RECURSIVE up(id) AS (SELECT value FROM json_each(?) UNION SELECT p.parent_id"
                "  FROM session_parents p JOIN up ON p.child_id = up.id JOIN sessions c ON c.id = p.child_id"
                "  WHERE c.tenant = ? AND c.project = ?)"
                " SELECT s.id, s.own_usage FROM up JOIN sessions s ON s.id = up.id"
                " WHERE s.tenant = ? AND s.project = ?",
                (json.dumps(list(session_ids)), self.tenant, self.project, self.tenant, self.project),
            )
            return {r["id"]: Usage.model_validate_json(r["own_usage"]) if r["own_usage"] else Usage() for r in rows}

        return await self.db.read(read)


def _always(conn: sqlite3.Connection) -> bool:
    return True
