"""``SQLiteMemoryStore``: the ``MemoryStore`` protocol on SQLite FTS5.

Why FTS5 (measured, see ARCHITECTURE.md and ``bench/memory.py``): adding an item is one INSERT
into an inverted index (no rebuild, unlike rank-bm25), a query is a few ms at 100k items, its
BM25 ranking agrees with rank-bm25, and the index lives in the same file and transactions as the
rest of the runtime, so every process on a home shares it and a commit makes an item searchable
at once. A query's cost grows with the number of items containing its terms: three rare words
cost ~1-4 ms at 100k items, three words each present in most items ~120 ms (FTS5 scores every
match; it has no top-k pruning).

Scores: FTS5's ``bm25()`` (k1 = 1.2, b = 0.75) is negative-is-better; we return its negation, so
higher is better. Its IDF is ``log((N - n + 0.5) / (n + 0.5))`` clamped to 1e-6 when that is
not positive (a term in half of the items or more), so every item sharing a query term scores
above zero (faintly, for such common terms: in a store of one or two items every score is
about 1e-6) and an item sharing none is never a hit. rank-bm25 floors such IDFs to
``0.25 * mean IDF`` instead; that is the only place the two formulas differ (with the same
tokens and k1/b, scores are otherwise equal to float precision; tests check this).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from runtime.ids import new_id, now
from runtime.memory import text
from runtime.memory.model import MemoryItem
from runtime.memory.store import SUPERSEDED, Found, NewMemory, content_digest
from runtime.store.sqlite.database import SQLiteDatabase, prefix_bounds, search_ids

_COLUMNS = "seq, id, uri, scope, content, tags, source, created_at, updated_at, tenant, project"


def _search_sql(space: int, match: str, k: int, scope: str | None) -> tuple[str, tuple[object, ...]]:
    """The ranked query. Unfiltered, FTS5 picks the top ``k`` by itself (its ``ORDER BY rank LIMIT``
    path never touches the items table) and only those are joined; with a scope filter every
    match must be joined and filtered before sorting, which costs more on large stores."""
    fts = f"memory_fts_{space}"
    columns = ", ".join("i." + c for c in _COLUMNS.split(", "))
    if scope is None:
        return (
            f"SELECT {columns}, -top.rank AS score FROM (SELECT rowid, rank FROM {fts} WHERE {fts} MATCH ?"
            " ORDER BY rank LIMIT ?) top JOIN memory_items i ON i.seq = top.rowid ORDER BY top.rank",
            (match, k),
        )
    return (
        f"SELECT {columns}, -{fts}.rank AS score FROM {fts} JOIN memory_items i ON i.seq = {fts}.rowid"
        f" WHERE {fts} MATCH ? AND i.scope = ? ORDER BY {fts}.rank LIMIT ?",
        (match, scope, k),
    )


def _item(row: sqlite3.Row) -> MemoryItem:
    return MemoryItem(
        id=row["id"],
        uri=row["uri"],
        scope=row["scope"],
        content=row["content"],
        tags=tuple(json.loads(row["tags"])),
        source=row["source"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        tenant=row["tenant"],
        project=row["project"],
    )


class SQLiteMemoryStore:
    """Memory items and their FTS5 index in the embedded SQLite database."""

    def __init__(self, db: SQLiteDatabase, tenant: str, project: str) -> None:
        self.db = db
        self.tenant = tenant
        self.project = project
        self._space: int | None = None  # once a space exists it is never removed, so caching is safe

    # -- spaces -----------------------------------------------------------------------------
    def _find_space(self, conn: sqlite3.Connection) -> int | None:
        """The space's id, if it exists. Only a committed space is cached: a reader sees only
        committed rows, and a writer's new space is cached by ``put`` after its commit."""
        if self._space is None:
            row = conn.execute(
                "SELECT id FROM memory_spaces WHERE tenant = ? AND project = ?", (self.tenant, self.project)
            ).fetchone()
            return None if row is None else int(row[0])
        return self._space

    def _read_space(self, conn: sqlite3.Connection) -> int | None:
        space = self._find_space(conn)
        if space is not None:
            self._space = space
        return space

    def _ensure_space(self, conn: sqlite3.Connection) -> int:
        space = self._find_space(conn)
        if space is None:
            cur = conn.execute("INSERT INTO memory_spaces (tenant, project) VALUES (?, ?)", (self.tenant, self.project))
            space = int(cur.lastrowid or 0)
            conn.execute(f"CREATE VIRTUAL TABLE memory_fts_{space} USING fts5(body, tokenize='unicode61')")
        return space

    # -- writes -----------------------------------------------------------------------------
    async def put(self, items: list[NewMemory], supersede: Sequence[str] = ()) -> list[MemoryItem]:
        """Write items in one transaction (all or none) and return them as stored.

        The items at the ``supersede`` URIs leave the search index in the same transaction (they
        stay readable and listed, tagged ``superseded``): a newer item holds what they held.
        """

        def write(conn: sqlite3.Connection) -> tuple[int, list[MemoryItem]]:
            space = self._ensure_space(conn)
            for uri in supersede:
                self._supersede(conn, space, uri)
            return space, [self._put_one(conn, space, new) for new in items]

        space, stored = await self.db.write(write)
        self._space = space
        return stored

    def _put_one(self, conn: sqlite3.Connection, space: int, new: NewMemory) -> MemoryItem:
        t, digest = now(), content_digest(new.content)
        if new.once_per_scope and (same := self._same_content(conn, new, digest)) is not None:
            return same
        tags = json.dumps(list(new.tags), ensure_ascii=False)
        old = conn.execute(
            "SELECT seq, id, created_at FROM memory_items WHERE tenant = ? AND project = ? AND uri = ?",
            (self.tenant, self.project, new.uri),
        ).fetchone()
        if old is None:
            memory_id, created_at = new.id or new_id("mem"), t
            row = (memory_id, space, self.tenant, self.project, new.scope, new.uri, new.content, tags, new.source)
            cur = conn.execute(
                "INSERT INTO memory_items (id, space_id, tenant, project, scope, uri, content, tags, source,"
                " created_at, updated_at, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*row, t, t, digest),
            )
            seq = int(cur.lastrowid or 0)
        else:
            seq, memory_id, created_at = int(old["seq"]), old["id"], old["created_at"]
            conn.execute(
                "UPDATE memory_items SET content = ?, tags = ?, source = ?, updated_at = ?, digest = ? WHERE seq = ?",
                (new.content, tags, new.source, t, digest, seq),
            )
            conn.execute(f"DELETE FROM memory_fts_{space} WHERE rowid = ?", (seq,))
        conn.execute(
            f"INSERT INTO memory_fts_{space} (rowid, body) VALUES (?, ?)", (seq, text.body(new.content, new.tags))
        )
        return MemoryItem(
            id=memory_id,
            uri=new.uri,
            scope=new.scope,
            content=new.content,
            tags=new.tags,
            source=new.source,
            created_at=created_at,
            updated_at=t,
            tenant=self.tenant,
            project=self.project,
        )

    def _supersede(self, conn: sqlite3.Connection, space: int, uri: str) -> None:
        row = conn.execute(
            "SELECT seq, tags FROM memory_items WHERE tenant = ? AND project = ? AND uri = ?",
            (self.tenant, self.project, uri),
        ).fetchone()
        if row is None or SUPERSEDED in json.loads(row["tags"]):
            return
        tags = json.dumps([*json.loads(row["tags"]), SUPERSEDED], ensure_ascii=False)
        conn.execute("UPDATE memory_items SET tags = ? WHERE seq = ?", (tags, row["seq"]))
        conn.execute(f"DELETE FROM memory_fts_{space} WHERE rowid = ?", (row["seq"],))

    def _same_content(self, conn: sqlite3.Connection, new: NewMemory, digest: str) -> MemoryItem | None:
        """An item of the same scope with exactly this content, if there is one."""
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM memory_items WHERE tenant = ? AND project = ? AND scope = ? AND digest = ?"
            " AND content = ? LIMIT 1",
            (self.tenant, self.project, new.scope, digest, new.content),
        ).fetchone()
        return None if row is None else _item(row)

    async def delete(self, *, memory_id: str | None = None, uri: str | None = None, prefix: str | None = None) -> int:
        """Delete by id, exact URI or URI prefix (the caller passes exactly one); returns how many."""
        where, args = self._where(memory_id, uri, prefix)

        def write(conn: sqlite3.Connection) -> int:
            space = self._find_space(conn)
            if space is None:
                return 0
            seqs = [row[0] for row in conn.execute(f"SELECT seq FROM memory_items WHERE {where}", args)]
            for seq in seqs:
                conn.execute(f"DELETE FROM memory_fts_{space} WHERE rowid = ?", (seq,))
                conn.execute("DELETE FROM memory_items WHERE seq = ?", (seq,))
            return len(seqs)

        return await self.db.write(write)

    def _where(self, memory_id: str | None, uri: str | None, prefix: str | None) -> tuple[str, tuple[str, ...]]:
        scoped = "tenant = ? AND project = ? AND "
        if memory_id is not None:
            return scoped + "id = ?", (self.tenant, self.project, memory_id)
        if uri is not None:
            return scoped + "uri = ?", (self.tenant, self.project, uri)
        assert prefix is not None
        return scoped + "uri >= ? AND uri < ?", (self.tenant, self.project, *prefix_bounds(prefix))

    # -- reads ------------------------------------------------------------------------------
    async def search(self, terms: list[str], k: int, scope: str | None) -> list[Found]:
        """The ``k`` best items for any of ``terms`` by BM25, best first, scores > 0 only."""
        if not terms:
            return []
        match = text.match_expression(terms)

        def read(conn: sqlite3.Connection) -> list[Found]:
            space = self._read_space(conn)
            if space is None:
                return []
            rows = conn.execute(*_search_sql(space, match, k, scope)).fetchall()
            return [Found(_item(r), float(r["score"])) for r in rows if r["score"] > 0]

        return await self.db.read(read)

    async def get(self, memory_id: str) -> MemoryItem | None:
        return await self._one("id = ?", memory_id)

    async def at(self, uri: str) -> MemoryItem | None:
        return await self._one("uri = ?", uri)

    async def _one(self, condition: str, value: str) -> MemoryItem | None:
        def read(conn: sqlite3.Connection) -> MemoryItem | None:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memory_items WHERE tenant = ? AND project = ? AND {condition}",
                (self.tenant, self.project, value),
            ).fetchone()
            return None if row is None else _item(row)

        return await self.db.read(read)

    async def ids(self, prefix: str, limit: int) -> list[str]:
        """Ids of items starting with ``prefix``, newest first."""
        return await search_ids(self.db, "memory_items", self.tenant, self.project, prefix, limit)

    async def scan(self, prefix: str, limit: int, after: str | None = None) -> list[MemoryItem]:
        """Items whose URI starts with ``prefix`` (and sorts after ``after``), in URI order."""
        where, args = self._where(None, None, prefix)
        if after is not None:
            where, args = where + " AND uri > ?", (*args, after)

        def read(conn: sqlite3.Connection) -> list[MemoryItem]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memory_items WHERE {where} ORDER BY uri LIMIT ?", (*args, limit)
            )
            return [_item(r) for r in rows]

        return await self.db.read(read)
