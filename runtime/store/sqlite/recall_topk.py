"""A keyword recall's top ``k`` on SQLite with one FTS5 scan: FTS5 ranks, we rescore its leaders exactly.

The store's score (``runtime.memory.store``) is Lucene's BM25: for each query term ``t`` in an item,
``idf(t) * f(t)``, ``f(t) = tf*(k1+1)/(tf + k1*(1-b+b*dl/avgdl))``. FTS5's ``bm25()`` sums the same
``f(t)`` over a query's phrases, but weighted by its own IDF, ``ftsidf(t) = ln((N-df+0.5)/(df+0.5))``, or
1e-6 when that is not positive (a term in half the items or more). Scoring each term in a query of its
own and summing per item (``recall._ranked``) is exact, but reads every posting of every term and runs
``bm25()`` once per posting: three words each in most items cost two to three times FTS5's own query.

So first FTS5's own query, once: ``"a" OR "b" OR ...`` ranked by ``bm25()``, best first, a bounded number
of rows. For an item whose FTS5 score is ``s = sum(e(t) * f(t))`` (``e(t)`` the weight FTS5 gave ``t``),
the store's score is at most the most that ``sum(idf(t) * f(t))`` can be with ``0 <= f(t) < k1+1`` and
that ``s``: a fractional knapsack, filled in the order of ``idf/e`` (``_Bound``). That bound only grows
with ``s``, so walking FTS5's order, once the bound of the next row is below the ``k``-th best exact
score found so far, no row after it can enter the top ``k``. The rows walked are rescored exactly
from the index's own text of the item (its terms joined by spaces: ``tf`` is a count, ``dl`` the number
of terms), with the store's formula; each rescored row's FTS5 score is recomputed from the same
``tf`` and ``dl`` and must equal what FTS5 said, or we do not trust the bound and the caller ranks the
exact way. Results are the exact way's: the same items, the same scores (to rounding), ties to the
lower ``seq``.

How tight the bound is depends on how far ``idf/e`` differs between the terms. For words in fewer than
half the items the two IDFs nearly agree (``idf/ftsidf`` within a few per cent): the walk stops after
about ``k`` rows. A word in most items gets 1e-6 from FTS5 whatever its ``idf``; naming it up to
``_COPIES`` times in the query (FTS5 sums each phrase, so ``e(t)`` becomes ``copies * ftsidf(t)``) brings
such words' weights into proportion with one another. Beside rarer words, such words are left out of
FTS5's query instead (named, they would make FTS5 score every item holding one, to add next to nothing):
what they add to an item's score is at most ``idf * (k1+1)`` each, added to the bound, and an item
holding none of the rarer words scores below that sum, so the walk's top ``k`` must all score above it.
When the walk does not end within the rows taken (``_WIDE``: some word in most items weighing much in a
query with rarer ones), ``search`` returns None and the caller ranks the exact way.
"""

from __future__ import annotations

import heapq
import math

from runtime.memory.store import idf
from runtime.memory.text import match_expression
from runtime.store.core.memory import ITEM_COLUMNS, K1, B
from runtime.store.core.statements import Op, Row, rows

#: Rows of FTS5's ranking taken when the IDFs nearly agree (the walk ends near ``k``) ...
_NARROW = 32
#: ... and when they do not: each row walked costs a few microseconds of rescoring.
_WIDE = 4096
#: ``idf/e`` across the query's terms within this factor counts as "nearly agree".
_AGREE = 1.1
#: The most times a term is named in FTS5's query to weigh it (each copy is read on every row).
_COPIES = 3
#: Below this many postings over the query's terms, scoring each term in a query of its own costs less than
#: the walk's few statements more. Measured query by query on one snapshot, the two taking turns (bench.memory's
#: typical queries, medians of walk/exact): at 10k items 1.33 under 128 postings, 1.10 at 256-512, 0.95 at
#: 512-1k, 0.89 at 1-2k; at 100k 0.87 at 512-1k, 0.82 at 1-2k, 0.74 at 2-4k (2,048 before that, measured
#: when every read prepared its statements again).
_POSTINGS = 512
#: FTS5's IDF of a word in half the items or more.
_FLOOR = 1e-6
#: A query mixing words in most items with rarer ones is ranked the exact way when the common words' idf
#: add up to more than this share of the rarer words' (measured on the bench's corpus: beyond it the walk
#: seldom ended within ``_WIDE`` rows, and the scan it took was wasted; still so with the common words left
#: out of FTS5's query: 100k items, the bench's common queries, 2.89x the bare query against 2.21x).
_MIXED = 0.25
#: Rows rescored per statement (the first batch is smaller: usually it is all there is to do).
_BATCH = 256
#: Slack for rounding when the bound is compared with an exact score and FTS5's score with ours.
_SLACK = 1e-9


def fts5_idf(n: int, df: int) -> float:
    """The IDF FTS5's ``bm25()`` applies (``fts5_aux.c``)."""
    raw = math.log((n - df + 0.5) / (df + 0.5))
    return raw if raw > 0 else 1e-6


class _Bound:
    """The most the store's score can be for an item with FTS5 score ``s`` (see the module's text)."""

    def __init__(self, weights: list[tuple[float, float]]) -> None:
        self.order = sorted(weights, key=lambda we: we[0] / we[1], reverse=True)  # (idf, e), most idf per e first

    def __call__(self, s: float) -> float:
        left, most = s * (1 + _SLACK), 0.0
        for weight, e in self.order:
            f = min(K1 + 1, left / e)
            most += weight * f
            left -= e * f
            if left <= 0:
                break
        return most * (1 + _SLACK)


def copies(idfs: dict[str, float], fts: dict[str, float]) -> dict[str, int]:
    """How many times to name each term so that FTS5's weights come near proportion with ours. Only words
    in most items are named again, and only when all are: beside a rarer word, whose FTS5 weight is some
    10^5 times theirs, copies would not change what the bound makes of them (all they can weigh)."""
    if any(fts[t] > _FLOOR for t in fts):
        return dict.fromkeys(idfs, 1)
    lowest = min(idfs.values())
    return {t: max(1, min(_COPIES, round(idfs[t] / lowest))) for t in idfs}


def search(
    space: int, dfs: dict[str, int], n: int, total: int, k: int, scope: str | None, least: int = _POSTINGS
) -> Op[list[Row] | None]:
    """The top ``k`` (rows of ``ITEM_COLUMNS`` and ``score``, best first), or None: rank the exact way
    (also when the terms have fewer than ``least`` postings in all)."""
    avgdl = total / n
    idfs = {t: idf(n, df) for t, df in dfs.items()}
    fts = {t: fts5_idf(n, df) for t, df in dfs.items()}
    if sum(dfs.values()) < least:
        return None
    clamped = sum(idfs[t] for t in dfs if fts[t] <= _FLOOR)
    if clamped > _MIXED * (sum(idfs.values()) - clamped) > 0:
        return None  # beside rarer words, common words weighing this much keep the walk going for thousands of rows
    # Beside rarer words, words in most items are left out of FTS5's query (it would weigh them 1e-6 and score
    # every item holding one); what they add to an item's score is at most ``spare``, counted into the bound.
    walked = [t for t in dfs if fts[t] > _FLOOR] or list(dfs)
    spare = sum(idfs[t] for t in dfs if t not in walked) * (K1 + 1) * (1 + _SLACK)
    times = copies({t: idfs[t] for t in walked}, {t: fts[t] for t in walked})
    e = {t: times[t] * fts[t] if t in times else 0.0 for t in dfs}
    bound = _Bound([(idfs[t], e[t]) for t in walked])
    spread = max(idfs[t] / e[t] for t in walked) / min(idfs[t] / e[t] for t in walked)
    take = (2 * k + _NARROW) * (1 if scope is None else 4) if spread <= _AGREE and not spare else max(_WIDE, 4 * k)
    table = f"memory_fts_{space}"
    phrases = match_expression([t for t in walked for _ in range(times[t])])
    ranked = yield rows(
        f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY 2 DESC LIMIT ?", phrases, take
    )
    best: list[tuple[float, int]] = []  # a min-heap of (score, -seq): the worst of the top k first
    at, batch = 0, k + 8
    while at < len(ranked):
        if len(best) == k and bound(ranked[at][1]) + spare < best[0][0]:
            break  # no row from here on can score above the k-th
        chunk = ranked[at : at + batch]
        at, batch = at + len(chunk), _BATCH
        fts_score = {int(r[0]): float(r[1]) for r in chunk}
        texts = yield rows(_texts(table, len(chunk), scope), *fts_score, *([scope] if scope is not None else []))
        for seq, body in texts:
            scored = _rescore(body, dfs, idfs, e, avgdl)
            if scored is None or abs(scored[1] - fts_score[seq]) > _SLACK * fts_score[seq]:
                return None  # FTS5 reads this item otherwise than we do: its bound cannot be trusted
            item = (scored[0], -seq)
            if len(best) < k:
                heapq.heappush(best, item)
            elif item > best[0]:
                heapq.heapreplace(best, item)
    else:
        if len(ranked) == take:  # the walk did not end within the rows taken: more may follow
            return None
    if spare and (len(best) < k or best[0][0] <= spare):
        return None  # an item holding only the words left out (scoring below ``spare``) might be in the top k
    if not best:
        return []
    top = sorted(((score, -negseq) for score, negseq in best), key=lambda x: (-x[0], x[1]))
    values = ", ".join("(?, ?)" for _ in top)
    found: list[Row] = yield rows(
        f"WITH top(seq, score) AS (VALUES {values}) SELECT {ITEM_COLUMNS}, top.score FROM top"
        " JOIN memory_items i ON i.seq = top.seq ORDER BY top.score DESC, i.seq",
        *[x for seq_score in top for x in (seq_score[1], seq_score[0])],
    )
    return found


def _texts(table: str, count: int, scope: str | None) -> str:
    """The indexed text of ``count`` items by rowid (FTS5's content table), of ``scope`` alone when given."""
    marks = ", ".join("?" * count)
    if scope is None:
        return f"SELECT id, c0 FROM {table}_content WHERE id IN ({marks})"
    return (
        f"SELECT c.id, c.c0 FROM {table}_content c JOIN memory_items i ON i.seq = c.id"
        f" WHERE c.id IN ({marks}) AND i.scope = ?"
    )


def _rescore(
    body: str, dfs: dict[str, int], idfs: dict[str, float], e: dict[str, float], avgdl: float
) -> tuple[float, float] | None:
    """The store's score of an item from its indexed text (our terms joined by single spaces), and the
    score FTS5 gave it (to check the two read it alike); None when it holds none of the terms."""
    spaced = f" {body} "
    norm = K1 * (1 - B + B * (body.count(" ") + 1) / avgdl)
    ours = theirs = 0.0
    for term in dfs:
        if tf := _tf(spaced, term):
            ours += idfs[term] * tf * (K1 + 1) / (tf + norm)
            theirs += e[term] * (tf * (K1 + 1) / (tf + norm))
    return (ours, theirs) if ours > 0 else None


def _tf(spaced: str, term: str) -> int:
    """How many of ``spaced``'s terms are ``term``. ``str.find`` of the bare term, checking the spaces around:
    a needle ending in a space (``" t "``) is as slow to find as the text is full of spaces. A term holds
    no space, so no whole-term match can start inside a partial one: skipping past it misses none."""
    count, size = 0, len(term)
    at = spaced.find(term)
    while at >= 0:
        if spaced[at - 1] == " " and spaced[at + size] == " ":
            count += 1
        at = spaced.find(term, at + size)
    return count
