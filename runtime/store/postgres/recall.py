"""The memory store's keyword index on PostgreSQL (``runtime.store.core.memory.Recall``): BM25 in plain SQL,
for stock PostgreSQL (no extension; ``ts_rank`` is not BM25).

Terms come from our own tokenizer (``runtime.memory.text.tokenize``: the same terms the SQLite
store indexes, CJK bigrams included), computed in Python. The index is three tables:

- ``memory_postings (space_id, term, seq, tf, len)``: one row per distinct term of an item, with
  its frequency there and the item's length (so scoring never joins back to the item);
- ``memory_docs (seq, space_id, len)``: which items are indexed, and their length in terms;
- ``memory_stats (space_id, shard, docs, length)``: the space's item count and total length,
  split over ``SHARDS`` rows. A transaction updates only the row of its own backend
  (``pg_backend_pid() % SHARDS``), so concurrent writers neither queue on one hot row nor can
  deadlock on two (each holds one row lock at most); readers sum the shards.

Document frequencies are not stored at all: a query counts them from the postings it is about
to score, so no writer updates a shared per-term counter, and no count can be lost or drift.
Every write is a few statements (store core operations) inside the caller's transaction, so the index is exactly as
committed as the items are.

The score (Lucene's BM25, as the SQLite store): for each distinct query term t in item d,
``idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avgdl))`` with
``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``, k1 and b ``core.memory``'s ``K1`` and ``B``, summed
over terms. The idf
is always positive, so every item sharing a term with the query scores above zero.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from runtime.memory.store import NewMemory
from runtime.memory.text import tokenize
from runtime.store.core.dialect import Dialect
from runtime.store.core.memory import ITEM_COLUMNS, K1, B
from runtime.store.core.statements import Op, Row, none, one, rows

SHARDS = 16

INDEX_DDL = f"""
CREATE TABLE memory_postings (
    space_id BIGINT NOT NULL,
    term TEXT COLLATE "C" NOT NULL,
    seq BIGINT NOT NULL,
    tf INTEGER NOT NULL,
    len INTEGER NOT NULL,
    PRIMARY KEY (space_id, term, seq) INCLUDE (tf, len)
);
CREATE INDEX memory_postings_item ON memory_postings (seq);
CREATE TABLE memory_docs (
    seq BIGINT PRIMARY KEY,
    space_id BIGINT NOT NULL,
    len INTEGER NOT NULL
);
CREATE TABLE memory_stats (
    space_id BIGINT NOT NULL,
    shard SMALLINT NOT NULL CHECK (shard >= 0 AND shard < {SHARDS}),
    docs BIGINT NOT NULL,
    length BIGINT NOT NULL,
    PRIMARY KEY (space_id, shard)
);
"""

_ADD_STATS = f"""
INSERT INTO memory_stats (space_id, shard, docs, length) VALUES (?, pg_backend_pid() % {SHARDS}, ?, ?)
ON CONFLICT (space_id, shard) DO UPDATE
SET docs = memory_stats.docs + excluded.docs, length = memory_stats.length + excluded.length
"""

_ADD_DOCS = (
    "INSERT INTO memory_docs (seq, space_id, len)"
    " SELECT u.seq, ?, u.len FROM unnest(?::bigint[], ?::int[]) AS u(seq, len)"
)

_ADD_POSTINGS = """
INSERT INTO memory_postings (space_id, term, seq, tf, len)
SELECT ?, u.term, u.seq, u.tf, u.len
FROM unnest(?::text[], ?::bigint[], ?::int[], ?::int[]) AS u(term, seq, tf, len)
"""

# The top k by BM25. For each distinct query term, ``scored`` reads its postings once (an
# index-only range scan), counting them as it goes (df, by a window over that term's rows alone) to
# turn into its idf, and sums the terms' contributions per item. Counting df here, rather than
# storing it, leaves writers no per-term counter to contend on; counting it by a scan of its own (as
# this did) read each term's postings twice: 10-16 ms against 17-21 ms for a query of three common
# terms at 100k items, the same rows and scores (the terms are summed in the same order). Arguments:
# space, terms, space, then the source's and k.
_RECALL = f"""
WITH stats AS (
    SELECT sum(docs)::float8 AS n, sum(length)::float8 / greatest(sum(docs), 1) AS avgdl
    FROM memory_stats WHERE space_id = ?
), scored AS (
    SELECT p.seq, sum(
        ln(1 + (s.n - p.df + 0.5) / (p.df + 0.5)) * p.tf * ({K1}::float8 + 1)
        / (p.tf + {K1}::float8 * (1 - {B}::float8 + {B}::float8 * p.len / s.avgdl))
    ) AS score
    FROM unnest(?::text[]) AS t(term) CROSS JOIN stats s CROSS JOIN LATERAL (
        SELECT seq, tf, len, count(*) OVER ()::float8 AS df FROM memory_postings m
        WHERE m.space_id = ? AND m.term = t.term
    ) p
    GROUP BY p.seq
)
SELECT {{columns}}, top.score FROM {{source}}
ORDER BY top.score DESC, top.seq LIMIT ?
"""


def term_counts(content: str, tags: Iterable[str] = ()) -> Counter[str]:
    """The indexed terms of an item (content, then tags) with their frequencies."""
    return Counter(tokenize(" ".join([content, *tags])))


def create(d: Dialect, space: int) -> Op[None]:
    yield from ()  # nothing to make: the postings tables hold every space


def put(d: Dialect, space: int, items: Mapping[int, NewMemory]) -> Op[None]:
    yield from unindex(d, space, list(items))
    yield from index(d, space, [(seq, term_counts(new.content, new.tags)) for seq, new in items.items()])


def index(d: Dialect, space: int, items: Sequence[tuple[int, Counter[str]]]) -> Op[None]:
    """Add items (``seq``, term counts) to a space's index, in the caller's transaction.

    An item already indexed must be ``unindex``-ed first (its postings would collide).
    """
    if not items:
        return
    terms: list[str] = []
    seqs: list[int] = []
    tfs: list[int] = []
    lens: list[int] = []
    for seq, counts in items:
        length = sum(counts.values())
        for term, tf in counts.items():
            terms.append(term)
            seqs.append(seq)
            tfs.append(tf)
            lens.append(length)
    doc_lens = [sum(counts.values()) for _, counts in items]
    yield none(_ADD_DOCS, space, [seq for seq, _ in items], doc_lens)
    if terms:
        yield none(_ADD_POSTINGS, space, terms, seqs, tfs, lens)
    yield none(_ADD_STATS, space, len(items), sum(doc_lens))


def unindex(d: Dialect, space: int, seqs: Sequence[int]) -> Op[int]:
    """Remove items from a space's index (those not in it are ignored); returns how many were."""
    if not seqs:
        return 0
    gone = yield rows(
        "DELETE FROM memory_docs WHERE space_id = ? AND seq = ANY(?::bigint[]) RETURNING seq, len", space, list(seqs)
    )
    if not gone:
        return 0
    yield none(
        "DELETE FROM memory_postings WHERE seq = ANY(?::bigint[]) AND space_id = ?", [r["seq"] for r in gone], space
    )
    yield none(_ADD_STATS, space, -len(gone), -sum(r["len"] for r in gone))
    return len(gone)


def search(
    d: Dialect, space: int, terms: Sequence[str], k: int, scope: str | None = None, columns: str = ITEM_COLUMNS
) -> Op[list[Row]]:
    """The ``k`` best items for any of ``terms``, best first (ties by seq), each with its ``score``.

    ``columns`` picks what each row carries besides ``score``: columns of the item (``i.id,
    i.content, ...``; the store's), which joins ``memory_items i`` for the top ``k`` only, or
    ``top.seq`` alone. ``scope`` keeps only the items of that scope (filtered before the top ``k``).
    """
    distinct = list(dict.fromkeys(terms))
    if not distinct or k < 1:
        return []
    args: list[object] = [space, distinct, space]
    if scope is not None:
        args.append(scope)
        source = "scored top JOIN memory_items i ON i.seq = top.seq AND i.scope = ?"
    elif "i." in columns:
        args.append(k)
        source = "(SELECT * FROM scored ORDER BY score DESC, seq LIMIT ?) top JOIN memory_items i ON i.seq = top.seq"
    else:
        source = "scored top"
    found: list[Row] = yield rows(_RECALL.format(columns=columns, source=source), *args, k)
    return found


def search_small(d: Dialect, space: int, terms: Sequence[str], k: int, scope: str | None) -> Op[list[Row] | None]:
    """``search``: PostgreSQL reads nothing on the event loop (``Dialect.point_reads`` is off), so this is
    asked only where a caller does not check; it is a read like any other."""
    found: list[Row] = yield from search(d, space, terms, k, scope)
    return found


def corpus(d: Dialect, space: int) -> Op[tuple[int, int]]:
    """The space's indexed item count and total length (what avgdl is computed from)."""
    row = yield one(
        "SELECT coalesce(sum(docs), 0)::bigint AS n, coalesce(sum(length), 0)::bigint AS total"
        " FROM memory_stats WHERE space_id = ?",
        space,
    )
    return int(row["n"]), int(row["total"])
