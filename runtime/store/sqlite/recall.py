"""The memory store's keyword index on SQLite: an FTS5 table per space (``runtime.store.core.memory.Recall``).

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
avgdl``, and FTS5's k1 and b are ``core.memory``'s ``K1`` and ``B``); we divide out FTS5's IDF,
``ftsidf = ln((N-df+0.5)/(df+0.5))`` or 1e-6 when that is not positive, and multiply in
``runtime.memory.store.idf``, with ``N`` read from FTS5's own row count (``_rows``) and ``df`` read
from an ``fts5vocab`` table. Tests check the scores against rank-bm25's BM25Okapi given this IDF.
Measured on one 100k-item store, three typical words, no other load (``bench/memory.py`` has the
full figures): FTS5's own ranking 5 ms, this 7 ms; an explicit ``tf`` from ``fts5vocab`` instances
14 ms; a postings table of our own (what the PostgreSQL backend keeps: ``(term, item, tf)`` plus
per-item lengths) 6 ms, but with its own writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from runtime.memory import text
from runtime.memory.store import NewMemory, idf
from runtime.store.core.dialect import Dialect
from runtime.store.core.memory import ITEM_COLUMNS
from runtime.store.core.statements import Op, Row, many, none, rows, value


def create(d: Dialect, space: int) -> Op[None]:
    yield none(f"CREATE VIRTUAL TABLE memory_fts_{space} USING fts5(body, tokenize='unicode61')")


def put(d: Dialect, space: int, items: Mapping[int, NewMemory]) -> Op[None]:
    yield from unindex(d, space, list(items))
    yield many(
        f"INSERT INTO memory_fts_{space} (rowid, body) VALUES (?, ?)",
        [(seq, text.body(new.content, new.tags)) for seq, new in items.items()],
    )


def unindex(d: Dialect, space: int, seqs: Sequence[int]) -> Op[int]:
    if seqs:
        yield many(f"DELETE FROM memory_fts_{space} WHERE rowid = ?", [(seq,) for seq in seqs])
    return len(seqs)


def search(d: Dialect, space: int, terms: list[str], k: int, scope: str | None) -> Op[list[Row]]:
    n = _rows((yield value(f"SELECT block FROM memory_fts_{space}_data WHERE id = 1")))
    # The vocab table is the connection's own (``temp``): reading it needs no write to the file.
    vocab = f"memory_vocab_{space}"
    yield none(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{vocab} USING fts5vocab(main, memory_fts_{space}, row)")
    marks = ", ".join("?" * len(terms))
    dfs = yield rows(f"SELECT term, doc FROM temp.{vocab} WHERE term IN ({marks})", *terms)
    weights = {r[0]: idf(n, int(r[1])) / _fts5_idf(n, int(r[1])) for r in dfs}  # only the terms present
    if not weights:
        return []
    sql, args = _ranked(space, weights, k, scope)
    found: list[Row] = yield rows(sql, *args)
    return found


def _rows(averages: bytes | None) -> int:
    """The index's item count, from FTS5's "averages" record (``_data`` row 1: varints, the row count
    first, then each column's total length), which FTS5 itself writes as each insert's or delete's
    transaction commits (within one, the record may lag behind; a recall reads a
    committed snapshot). ``count(*)`` over ``_docsize`` equals it but scans the
    table on every query (5.8 ms at a million items). The varint is SQLite's: big-endian 7-bit groups
    with the high bit set on all but the last, a ninth byte carrying 8 bits."""
    n = 0
    for i, byte in enumerate(averages or b""):
        if i == 8:
            return (n << 8) | byte
        n = (n << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return n


def _fts5_idf(n: int, df: int) -> float:
    """The IDF FTS5's ``bm25()`` applies, which the ranking query divides out."""
    raw = math.log((n - df + 0.5) / (df + 0.5))
    return raw if raw > 0 else 1e-6


def _ranked(space: int, weights: dict[str, float], k: int, scope: str | None) -> tuple[str, list[object]]:
    """The ranked query: per term, FTS5's one-term ``bm25()`` times ``idf / ftsidf`` (``weights``),
    summed per item. Unfiltered, only the top ``k`` are joined to the items table; with a scope
    filter every match is joined and filtered before sorting, which costs more on large stores."""
    fts = f"memory_fts_{space}"
    per_term = " UNION ALL ".join(
        f"SELECT rowid AS seq, ? * bm25({fts}) AS part FROM {fts} WHERE {fts} MATCH ?" for _ in weights
    )
    args: list[object] = [x for term, w in weights.items() for x in (w, text.match_expression([term]))]
    # MATERIALIZED: bm25() may only run in the query that scans its FTS5 table, never flattened into another.
    scores = f"WITH parts AS MATERIALIZED ({per_term}) SELECT seq, -sum(part) AS score FROM parts GROUP BY seq"
    if scope is None:
        sql = (
            f"SELECT {ITEM_COLUMNS}, top.score FROM ({scores} ORDER BY score DESC, seq LIMIT ?) top"
            " JOIN memory_items i ON i.seq = top.seq ORDER BY top.score DESC, i.seq"
        )
        return sql, [*args, k]
    sql = (
        f"SELECT {ITEM_COLUMNS}, s.score FROM ({scores}) s JOIN memory_items i ON i.seq = s.seq"
        " WHERE i.scope = ? ORDER BY s.score DESC, i.seq LIMIT ?"
    )
    return sql, [*args, scope, k]
