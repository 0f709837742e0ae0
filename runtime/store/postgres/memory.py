"""``PostgresMemoryStore``: the ``MemoryStore`` protocol on PostgreSQL, ranked by BM25 in plain SQL.

The index is ``runtime.store.postgres.bm25``'s (postings, per-item lengths, sharded corpus
statistics), kept in the same transaction as the items, so a committed item is searchable at
once and a rolled-back one never was. Scores are those ``runtime.memory.store`` defines, computed
from the same terms (``runtime.memory.text.tokenize`` of content and tags, CJK included) as the
SQLite store, so both backends give the same scores for the same items.

Concurrent writers lose nothing: a write at a URI is one ``INSERT ... ON CONFLICT DO UPDATE`` (the
row lock orders two writers at one URI, the second replacing the first's item and its postings),
the corpus statistics are sharded per backend (``bm25``), and document frequencies are counted at
query time, so no shared counter exists to lose an update. ``once_per_scope`` writes take a
transaction-scoped advisory lock on (space, scope, content digest), so two writers of the same
fact cannot both miss each other's item.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

import asyncpg

from runtime.ids import new_id, now
from runtime.memory.model import MemoryItem
from runtime.memory.store import SUPERSEDED, Found, NewMemory, content_digest
from runtime.store.postgres import bm25
from runtime.store.postgres.database import PostgresDatabase, prefix_bounds, search_ids

_COLUMNS = "seq, id, uri, scope, content, tags, source, created_at, updated_at, tenant, project"
_ITEM_COLUMNS = ", ".join("i." + c for c in _COLUMNS.split(", "))

_UPSERT = """
INSERT INTO memory_items (id, space_id, tenant, project, scope, uri, content, tags, source, created_at, updated_at,
    digest)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)
ON CONFLICT (tenant, project, uri) DO UPDATE
SET content = excluded.content, tags = excluded.tags, source = excluded.source, updated_at = excluded.updated_at,
    digest = excluded.digest
RETURNING seq, id, created_at, (xmax = 0) AS inserted
"""


class PostgresMemoryStore:
    """Memory items and their BM25 index in a PostgreSQL database."""

    def __init__(self, db: PostgresDatabase, tenant: str, project: str) -> None:
        self.db = db
        self.tenant = tenant
        self.project = project
        self._space: int | None = None  # once a space exists it is never removed, so caching is safe

    # -- spaces -----------------------------------------------------------------------------
    async def _find_space(self, conn: asyncpg.Connection) -> int | None:
        """The space's id, if it exists. Only a committed space is cached (by ``put``, after its commit)."""
        if self._space is not None:
            return self._space
        space = await conn.fetchval(
            "SELECT id FROM memory_spaces WHERE tenant = $1 AND project = $2", self.tenant, self.project
        )
        return None if space is None else int(space)

    async def _read_space(self, conn: asyncpg.Connection) -> int | None:
        space = await self._find_space(conn)
        if space is not None:
            self._space = space
        return space

    async def _ensure_space(self, conn: asyncpg.Connection) -> int:
        space = await self._find_space(conn)
        if space is None:  # two first writers at once: the second's DO UPDATE waits for and returns the first's
            space = await conn.fetchval(
                "INSERT INTO memory_spaces (tenant, project) VALUES ($1, $2)"
                " ON CONFLICT (tenant, project) DO UPDATE SET tenant = excluded.tenant RETURNING id",
                self.tenant,
                self.project,
            )
        return int(space)

    # -- writes -----------------------------------------------------------------------------
    async def put(self, items: list[NewMemory], supersede: Sequence[str] = ()) -> list[MemoryItem]:
        """Write items in one transaction (all or none) and return them as stored.

        The items at the ``supersede`` URIs leave the search index in the same transaction (they
        stay readable and listed, tagged ``superseded``): a newer item holds what they held.
        """

        async def write(conn: asyncpg.Connection) -> tuple[int, list[MemoryItem]]:
            space = await self._ensure_space(conn)
            for uri in supersede:
                await self._supersede(conn, space, uri)
            stored: list[MemoryItem] = []
            fresh: dict[int, Counter[str]] = {}  # seq -> terms, indexed at the end in one go
            replaced: list[int] = []  # items indexed before this write whose postings must go first
            for new in items:
                stored.append(await self._put_one(conn, space, new, fresh, replaced))
            await bm25.unindex(conn, space, replaced)
            await bm25.index(conn, space, list(fresh.items()))
            return space, stored

        space, stored = await self.db.write(write)
        self._space = space
        return stored

    async def _put_one(
        self,
        conn: asyncpg.Connection,
        space: int,
        new: NewMemory,
        fresh: dict[int, Counter[str]],
        replaced: list[int],
    ) -> MemoryItem:
        t, digest = now(), content_digest(new.content)
        if new.once_per_scope:
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, $2))", f"{new.scope} {digest}", space)
            if (same := await self._same_content(conn, new, digest)) is not None:
                return same
        row = await conn.fetchrow(
            _UPSERT,
            new.id or new_id("mem"),
            space,
            self.tenant,
            self.project,
            new.scope,
            new.uri,
            new.content,
            json.dumps(list(new.tags), ensure_ascii=False),
            new.source,
            t,
            digest,
        )
        seq = int(row["seq"])
        if not row["inserted"] and seq not in fresh:
            replaced.append(seq)
        fresh[seq] = bm25.term_counts(new.content, new.tags)
        return MemoryItem(
            id=row["id"],
            uri=new.uri,
            scope=new.scope,
            content=new.content,
            tags=new.tags,
            source=new.source,
            created_at=row["created_at"],
            updated_at=t,
            tenant=self.tenant,
            project=self.project,
        )

    async def _supersede(self, conn: asyncpg.Connection, space: int, uri: str) -> None:
        row = await conn.fetchrow(
            "SELECT seq, tags FROM memory_items WHERE tenant = $1 AND project = $2 AND uri = $3 FOR UPDATE",
            self.tenant,
            self.project,
            uri,
        )
        if row is None or SUPERSEDED in json.loads(row["tags"]):
            return
        tags = json.dumps([*json.loads(row["tags"]), SUPERSEDED], ensure_ascii=False)
        await conn.execute("UPDATE memory_items SET tags = $1 WHERE seq = $2", tags, row["seq"])
        await bm25.unindex(conn, space, [row["seq"]])

    async def _same_content(self, conn: asyncpg.Connection, new: NewMemory, digest: str) -> MemoryItem | None:
        """An item of the same scope with exactly this content, if there is one."""
        row = await conn.fetchrow(
            f"SELECT {_COLUMNS} FROM memory_items WHERE tenant = $1 AND project = $2 AND scope = $3 AND digest = $4"
            " AND content = $5 LIMIT 1",
            self.tenant,
            self.project,
            new.scope,
            digest,
            new.content,
        )
        return None if row is None else MemoryItem.from_row(row)

    async def delete(self, *, memory_id: str | None = None, uri: str | None = None, prefix: str | None = None) -> int:
        """Delete by id, exact URI or URI prefix (the caller passes exactly one); returns how many."""
        where, args = self._where(memory_id, uri, prefix)

        async def write(conn: asyncpg.Connection) -> int:
            space = await self._find_space(conn)
            if space is None:
                return 0
            gone = await conn.fetch(f"DELETE FROM memory_items WHERE {where} RETURNING seq", *args)
            await bm25.unindex(conn, space, [r["seq"] for r in gone])
            return len(gone)

        return await self.db.write(write)

    def _where(self, memory_id: str | None, uri: str | None, prefix: str | None) -> tuple[str, tuple[str, ...]]:
        scoped = "tenant = $1 AND project = $2 AND "
        if memory_id is not None:
            return scoped + "id = $3", (self.tenant, self.project, memory_id)
        if uri is not None:
            return scoped + "uri = $3", (self.tenant, self.project, uri)
        assert prefix is not None
        return scoped + "uri >= $3 AND uri < $4", (self.tenant, self.project, *prefix_bounds(prefix))

    # -- reads ------------------------------------------------------------------------------
    async def search(self, terms: list[str], k: int, scope: str | None) -> list[Found]:
        """The ``k`` best items for any of ``terms`` by BM25, best first, scores > 0 only."""
        if not terms:
            return []

        async def read(conn: asyncpg.Connection) -> list[Found]:
            space = await self._read_space(conn)
            if space is None:
                return []
            rows = await bm25.recall(conn, space, terms, k, scope=scope, columns=_ITEM_COLUMNS)
            return [Found(MemoryItem.from_row(r), float(r["score"])) for r in rows if r["score"] > 0]

        return await self.db.read(read)

    async def get(self, memory_id: str) -> MemoryItem | None:
        return await self._one("id = $3", memory_id)

    async def at(self, uri: str) -> MemoryItem | None:
        return await self._one("uri = $3", uri)

    async def _one(self, condition: str, value: str) -> MemoryItem | None:
        async def read(conn: asyncpg.Connection) -> MemoryItem | None:
            row = await conn.fetchrow(
                f"SELECT {_COLUMNS} FROM memory_items WHERE tenant = $1 AND project = $2 AND {condition}",
                self.tenant,
                self.project,
                value,
            )
            return None if row is None else MemoryItem.from_row(row)

        return await self.db.read(read)

    async def ids(self, prefix: str, limit: int) -> list[str]:
        """Ids of items starting with ``prefix``, newest first."""
        return await search_ids(self.db, "memory_items", self.tenant, self.project, prefix, limit)

    async def scan(self, prefix: str, limit: int, after: str | None = None) -> list[MemoryItem]:
        """Items whose URI starts with ``prefix`` (and sorts after ``after``), in URI order."""
        where, args = self._where(None, None, prefix)
        if after is not None:
            where, args = where + " AND uri > $5", (*args, after)

        async def read(conn: asyncpg.Connection) -> list[MemoryItem]:
            rows = await conn.fetch(
                f"SELECT {_COLUMNS} FROM memory_items WHERE {where} ORDER BY uri LIMIT ${len(args) + 1}", *args, limit
            )
            return [MemoryItem.from_row(r) for r in rows]

        return await self.db.read(read)
