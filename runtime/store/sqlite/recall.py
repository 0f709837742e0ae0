"""The memory store's keyword index on SQLite: an FTS5 table per space (``runtime.store.core.memory.Recall``).

Why FTS5 (measured, see ARCHITECTURE.md and ``bench/memory.py``): adding an item is one INSERT
into an inverted index (no rebuild, unlike rank-bm25), a query is a few ms at 100k items, its
BM25 ranking agrees with rank-bm25, and the index lives in the same file and transactions as the
rest of the runtime, so every process on a home shares it and a commit makes an item searchable
at once.

Scores are those ``runtime.memory.store`` defines (Okapi BM25 with Lucene's IDF), with ``N`` and the
total length read from FTS5's own averages record (``_averages``) and each term's ``df`` counted by a
match of the term alone, in one statement (``_probes``). A query is ranked in one of two ways, with the
same results:

- ``recall_topk``: FTS5's own ``bm25()`` query, once, best first; its leading rows are rescored exactly
  until a bound shows no later row can enter the top ``k``. Its cost is FTS5's own query's.
- ``_ranked`` (when the walk cannot decide, see ``recall_topk``): FTS5 evaluates each term's
  term-frequency part in a query of its own (``bm25()`` of a one-term query is
  ``-ftsidf(t) * tf*(k1+1)/(tf + k1*(1-b+b*dl/avgdl))``, FTS5's k1 and b being ``core.memory``'s ``K1``
  and ``B``); we divide out FTS5's IDF and multiply in ``runtime.memory.store.idf``, summed per item.
  It reads every posting of every term: for three words each in most items, two to three times FTS5's
  own query.

A recall known small runs on the event loop's own connection (``search_small``, through
``Executor.lookup``: a hop to a reader thread and back costs more than such a recall's statements). Its
work is bounded before it is done: each term's postings are counted by a match with a ``LIMIT`` (the
count is the term's ``df`` when under it), the ranking reads only those postings, and the items' text
is measured a row at a time until a budget is spent, before any is read out. Past any bound it returns
None and the recall goes to a reader thread.

Tests check the scores against rank-bm25's BM25Okapi given this IDF, and the two ways against each other.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from runtime.memory import text
from runtime.memory.store import NewMemory, idf
from runtime.store.core.dialect import Dialect
from runtime.store.core.memory import ITEM_COLUMNS
from runtime.store.core.statements import Op, Row, many, none, one, rows
from runtime.store.sqlite import recall_topk as topk


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
    counted = yield one(_probes(f"memory_fts_{space}", len(terms), None), *[text.match_expression([t]) for t in terms])
    n, total = _averages(counted[0])
    dfs = {t: int(c) for t, c in zip(terms, counted[1:], strict=True) if c}  # the terms present, in the query's order
    if not dfs:
        return []
    pruned = yield from topk.search(space, dfs, n, total, k, scope)
    if pruned is not None:
        return pruned
    weights = {t: idf(n, df) / topk.fts5_idf(n, df) for t, df in dfs.items()}
    sql, args = _ranked(space, weights, k, scope)
    found: list[Row] = yield rows(sql, *args)
    return found


#: A recall runs on the event loop when its terms have at most this many postings in all (counted as
#: ``_probes`` does): it then ranks the exact way (``_ranked``: up to ``topk._POSTINGS``, the same bound),
#: measured at 10k items at 280 us median for under 128 postings, 340 for 128-256 and 500 for 256-512: at
#: most about as long as a session page read in place (``core.sessions.POINT_READ_*``), and the hop to a
#: reader thread and back, which it saves, costs 130-210 us on this machine under load.
SMALL_POSTINGS = 512
#: ... and when its items hold at most this many characters in all (measured before they are read out:
#: ``length()`` of each in rank order, stopping past the budget, so at most one item, 200k characters,
#: beyond it is measured; about 0.4 us per 1,000 characters to measure, 0.8 to read).
SMALL_CHARS = 64_000


def search_small(d: Dialect, space: int, terms: list[str], k: int, scope: str | None) -> Op[list[Row] | None]:
    """What ``search`` returns, when that is known to be cheap before it is done (see the module's text);
    else None. Same statements' results: the exact ranking, the same rows."""
    fts = f"memory_fts_{space}"
    found = yield one(_probes(fts, len(terms), SMALL_POSTINGS), *[text.match_expression([t]) for t in terms])
    if any(c is None for c in found[1:]) or sum(found[1:]) > SMALL_POSTINGS:
        return None
    counts = [int(c) for c in found[1:]]
    n, _ = _averages(found[0])
    dfs = {t: c for t, c in zip(terms, counts, strict=True) if c}
    if not dfs:
        return []
    weights = {t: idf(n, df) / topk.fts5_idf(n, df) for t, df in dfs.items()}
    sql, ranked_args = _ranked(space, weights, k, scope, items=False)
    top = yield rows(sql, *ranked_args)
    if not top:
        return []
    values = ", ".join("(?, ?, ?)" for _ in top)
    measured: list[Row] = yield rows(
        f"WITH RECURSIVE top(n, seq, score) AS (VALUES {values}),"
        " walk(n, chars) AS (SELECT 0, 0 UNION ALL SELECT w.n + 1, w.chars + coalesce((SELECT length(i.content)"
        " FROM top JOIN memory_items i ON i.seq = top.seq WHERE top.n = w.n + 1), 0) FROM walk w"
        " WHERE w.n < ? AND w.chars <= ?)"
        f" SELECT {ITEM_COLUMNS}, top.score FROM top JOIN memory_items i ON i.seq = top.seq"
        " WHERE (SELECT max(chars) FROM walk) <= ? ORDER BY top.n",
        *[x for at, r in enumerate(top, 1) for x in (at, r[0], r[1])],
        len(top),
        SMALL_CHARS,
        SMALL_CHARS,
    )
    return measured or None


def _probes(fts: str, count: int, most: int | None) -> str:
    """The averages record and each term's postings (``df``: a match of the term alone, which reads its
    doclist's rowids; ``fts5vocab``'s ``doc`` took a third longer and a temp table per connection).

    With ``most``, each term is counted up to ``most + 1``, term after term, and only while the terms
    before it come to ``most`` or fewer (else NULL): a probe reads at most ``2 * most + 1`` rowids
    whatever the terms, and a recall declined has read little more than ``most``."""
    averages = f"(SELECT block FROM {fts}_data WHERE id = 1)"
    if most is None:
        counts = ", ".join(f"(SELECT count(*) FROM {fts} WHERE {fts} MATCH ?)" for _ in range(count))
        return f"SELECT {averages}, {counts}"
    probe = f"(SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? LIMIT {most + 1}))"
    steps = [f"p0 AS MATERIALIZED (SELECT {probe} AS c0)"]
    steps += [
        f"p{i} AS MATERIALIZED (SELECT {', '.join(f'c{j}' for j in range(i))},"
        f" CASE WHEN {' + '.join(f'c{j}' for j in range(i))} <= {most} THEN {probe} END AS c{i} FROM p{i - 1})"
        for i in range(1, count)
    ]
    counts = ", ".join(f"c{i}" for i in range(count))
    return f"WITH {', '.join(steps)} SELECT {averages}, {counts} FROM p{count - 1}"


def _averages(block: bytes | None) -> tuple[int, int]:
    """The index's item count and their total length in terms, from FTS5's "averages" record (see ``_rows``)."""
    n, total, *_ = [*_varints(block or b"", 2), 0, 0]
    return n, total


def _varints(data: bytes, count: int) -> Iterator[int]:
    """The first ``count`` of SQLite's varints in ``data``: big-endian 7-bit groups with the high bit set on
    all but the last, a ninth byte carrying 8 bits."""
    n = used = 0
    for byte in data:
        if used == 8:
            n, used, byte = (n << 8) | byte, 0, 0
            yield n
        else:
            n, used = (n << 7) | (byte & 0x7F), used + 1
            if byte & 0x80:
                continue
            yield n
        count -= 1
        if count == 0:
            return
        n = used = 0


def _rows(averages: bytes | None) -> int:
    """The index's item count, from FTS5's "averages" record (``_data`` row 1: varints, the row count
    first, then each column's total length), which FTS5 itself writes as each insert's or delete's
    transaction commits (within one, the record may lag behind; a recall reads a
    committed snapshot). ``count(*)`` over ``_docsize`` equals it but scans the
    table on every query (5.8 ms at a million items)."""
    return _averages(averages)[0]


def _ranked(
    space: int, weights: dict[str, float], k: int, scope: str | None, items: bool = True
) -> tuple[str, list[object]]:
    """The ranked query: per term, FTS5's one-term ``bm25()`` times ``idf / ftsidf`` (``weights``),
    summed per item. Unfiltered, only the top ``k`` are joined to the items table; with a scope
    filter every match is joined and filtered before sorting, which costs more on large stores.
    ``items=False``: only ``seq`` and ``score`` of the top ``k`` (a scope is read from the items' rows,
    their text is not)."""
    fts = f"memory_fts_{space}"
    per_term = " UNION ALL ".join(
        f"SELECT rowid AS seq, ? * bm25({fts}) AS part FROM {fts} WHERE {fts} MATCH ?" for _ in weights
    )
    args: list[object] = [x for term, w in weights.items() for x in (w, text.match_expression([term]))]
    # MATERIALIZED: bm25() may only run in the query that scans its FTS5 table, never flattened into another.
    scores = f"WITH parts AS MATERIALIZED ({per_term}) SELECT seq, -sum(part) AS score FROM parts GROUP BY seq"
    if not items:
        if scope is None:
            return f"{scores} ORDER BY score DESC, seq LIMIT ?", [*args, k]
        sql = (
            f"SELECT s.seq, s.score FROM ({scores}) s JOIN memory_items i ON i.seq = s.seq"
            " WHERE i.scope = ? ORDER BY s.score DESC, i.seq LIMIT ?"
        )
        return sql, [*args, scope, k]
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
