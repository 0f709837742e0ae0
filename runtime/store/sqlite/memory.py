"""``SQLiteMemoryStore``: the ``MemoryStore`` protocol on SQLite FTS5.

Why FTS5 (measured, see ARCHITECTURE.md and ``bench/memory.py``): adding an item is one INSERT
into an inverted index (no rebuild, unlike rank-bm25), a query is a few ms at 100k items, its
BM25 ranking agrees with rank-bm25, and the index lives in the same file and transactions as the
rest of the runtime, so every process on a home shares it and a commit makes an item searchable
at once. A query's cost grows with the number of items containing its terms: three rare words
cost a few ms at 100k items, three words each present in most items a few hundred ms (every
match is scored; there is no top-k pruning).

Scores are those ``runtime.memory.store`` defines (Okapi BM25 with Lucene's IDF). How SQLite gets
there: FTS5 finds the items holding each term and evaluates the term-frequency part (``bm25()`` of a
one-term query is ``-ftsidf(t) * tf*(k1+1)/(tf + k1*(1-b+b*dl/avgdl))`` with the same ``tf, dl,
avgdl``, k1 and b); we divide out FTS5's IDF, ``ftsidf = ln((N-df+0.5)/(df+0.5))`` or 1e-6 when that
is not positive, and multiply in ``runtime.memory.store.idf``, with ``N`` counted from the index's
``_docsize`` table and ``df`` read from an ``fts5vocab`` table. Tests check the scores against
rank-bm25's BM25Okapi given this IDF. Measured on one 100k-item store, three typical words, no other
load (``bench/memory.py`` has the full figures): FTS5's own ranking 5 ms, this 7 ms; an explicit
``tf`` from ``fts5vocab`` instances 14 ms; a postings table of our own (what a PostgreSQL backend
would keep: ``(term, item, tf)`` plus per-item lengths) 6 ms, but with its own writes.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Sequence

from runtime.ids import new_id, now
from runtime.memory import text
from runtime.memory.model import MemoryItem
from runtime.memory.store import SUPERSEDED, Found, NewMemory, content_digest, idf
from runtime.store.sqlite.database import SQLiteDatabase, prefix_bounds, search_ids

_COLUMNS = "seq, id, uri, scope, content, tags, source, created_at, updated_at, tenant, project"


def _fts5_idf(n: int, df: int) -> float:
    """The IDF FTS5's ``bm25()`` applies, which the ranking query divides out."""
    raw = math.log((n - df + 0.5) / (df + 0.5))
    return raw if raw > 0 else 1e-6


def _document_frequencies(conn: sqlite3.Connection, space: int, terms: list[str]) -> dict[str, int]:
    """``df`` of each term present in the space (absent terms left out), from an ``fts5vocab`` table.

    The vocab table is a connection's own (``temp``): reading it needs no write to the file.
    """
    vocab = f"memory_vocab_{space}"
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{vocab} USING fts5vocab(main, memory_fts_{space}, row)")
    marks = ", ".join("?" * len(terms))
    return {r[0]: int(r[1]) for r in conn.execute(f"SELECT term, doc FROM temp.{vocab} WHERE term IN ({marks})", terms)}


def _search_sql(space: int, weights: dict[str, float], k: int, scope: str | None) -> tuple[str, tuple[object, ...]]:
    """The ranked query: per term, FTS5's one-term ``bm25()`` times ``idf / ftsidf`` (``weights``),
    summed per item. Unfiltered, only the top ``k`` are joined to the items table; with a scope
    filter every match is joined and filtered before sorting, which costs more on large stores."""
    fts = f"memory_fts_{space}"
    per_term = " UNION ALL ".join(
        f"SELECT rowid AS seq, ? * bm25({fts}) AS part FROM {fts} WHERE {fts} MATCH ?" for _ in weights
    )
    args: list[object] = [x for term, w in weights.items() for x in (w, text.match_expression([term]))]
    columns = ", ".join("i." + c for c in _COLUMNS.split(", "))
    # MATERIALIZED: bm25() may only run in the query that scans its FTS5 table, never flattened into another.
    scores = f"WITH parts AS MATERIALIZED ({per_term}) SELECT seq, -sum(part) AS score FROM parts GROUP BY seq"
    if scope is None:
        return (
            f"SELECT {columns}, top.score FROM ({scores} ORDER BY score DESC, seq LIMIT ?) top"
            " JOIN memory_items i ON i.seq = top.seq ORDER BY top.score DESC, i.seq",
            (*args, k),
        )
    return (
        f"SELECT {columns}, s.score FROM ({scores}) s JOIN memory_items i ON i.seq = s.seq"
        " WHERE i.scope = ? ORDER BY s.score DESC, i.seq LIMIT ?",
        (*args, scope, k),
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
        return None if row is None else MemoryItem.from_row(row)

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

        def read(conn: sqlite3.Connection) -> list[Found]:
            space = self._read_space(conn)
            if space is None:
                return []
            n = int(conn.execute(f"SELECT count(*) FROM memory_fts_{space}_docsize").fetchone()[0])
            dfs = _document_frequencies(conn, space, terms)
            weights = {t: idf(n, df) / _fts5_idf(n, df) for t, df in dfs.items()}
            if not weights:
                return []
            rows = conn.execute(*_search_sql(space, weights, k, scope)).fetchall()
            return [Found(MemoryItem.from_row(r), float(r["score"])) for r in rows if r["score"] > 0]

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
            return None if row is None else MemoryItem.from_row(row)

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
            return [MemoryItem.from_row(r) for r in rows]

        return await self.db.read(read)
