"""SQLite's one-scan top k (``runtime.store.sqlite.recall_topk``) returns what ranking every posting returns.

A real store file: items written through the runtime, then the two rankings run on one connection in
one snapshot: the walk over FTS5's own order (taken here whatever the postings' count), rescoring its
leaders, and ``recall._ranked`` (each term scored in a query of its own, summed per item). Same items
in the same order, scores to 1e-12. The queries cover words in most items (FTS5's IDF clamped to
1e-6: the walk names them more than once), rare words, a mix, such a word beside rarer ones (left out of
FTS5's query, what it can add counted into the bound), k from 1 to 40 and a scope filter; the walk must
actually decide the rare, the common and the left-out queries (not hand them all back to the exact
ranking), or this would compare the exact ranking with itself.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import anyio
import pytest

from runtime import Runtime
from runtime.memory.store import idf
from runtime.memory.text import query_terms
from runtime.store.sqlite import recall, recall_topk
from runtime.store.sqlite.executor import drive

pytestmark = pytest.mark.anyio

VOCAB = [f"w{i}" for i in range(400)]
ZIPF = [1 / (i + 1) for i in range(len(VOCAB))]


async def _store(home: Path) -> None:
    rnd = random.Random(5)
    docs = [" ".join(rnd.choices(VOCAB, ZIPF, k=rnd.randint(20, 60))) for _ in range(500)]
    async with Runtime.open(home, embedder="none") as rt:

        async def one(i: int) -> None:
            await rt.memory.remember(docs[i], path=f"d{i}", scope="agent" if i % 4 == 0 else "user")

        async with anyio.create_task_group() as tg:
            for i in range(len(docs)):
                tg.start_soon(one, i)


Ranked = list[tuple[int, float]]


def _rankings(
    conn: sqlite3.Connection, space: int, terms: list[str], k: int, scope: str | None
) -> tuple[Ranked | None, Ranked]:
    """(the walk's rows or None, the exact ranking's rows), as (seq, score) pairs."""
    n, total = recall._averages(conn.execute(f"SELECT block FROM memory_fts_{space}_data WHERE id = 1").fetchone()[0])
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.v USING fts5vocab(main, memory_fts_{space}, row)")
    counted = dict(conn.execute(f"SELECT term, doc FROM temp.v WHERE term IN ({', '.join('?' * len(terms))})", terms))
    dfs = {t: counted[t] for t in terms if t in counted}
    walked = drive(conn, recall_topk.search(space, dfs, n, total, k, scope, least=0))  # small: walk anyway
    weights = {t: idf(n, df) / recall_topk.fts5_idf(n, df) for t, df in dfs.items()}
    sql, args = recall._ranked(space, weights, k, scope)
    exact = [(r["seq"], r["score"]) for r in conn.execute(sql, args)]
    return (None if walked is None else [(r["seq"], r["score"]) for r in walked]), exact


async def test_the_walk_returns_the_exact_top_k(tmp_path: Path) -> None:
    await _store(tmp_path)
    conn = sqlite3.connect(tmp_path / "rath.db", isolation_level=None)
    conn.row_factory = sqlite3.Row
    space = conn.execute("SELECT id FROM memory_spaces").fetchone()[0]
    rnd = random.Random(9)
    common = [" ".join(rnd.sample(VOCAB[:8], 3)) for _ in range(12)]  # each word in most items
    rare = [" ".join(rnd.sample(VOCAB[40:400], 3)) for _ in range(12)]
    mixed = [f"{rnd.choice(VOCAB[:3])} {rnd.choice(VOCAB[20:60])}" for _ in range(12)]
    # a word in most items beside two rarer ones: left out of FTS5's query, its most counted into the bound
    left_out = [f"{VOCAB[i % 2]} {' '.join(rnd.sample(VOCAB[20:80], 2))}" for i in range(12)]
    decided = {"common": 0, "rare": 0}
    conn.execute("BEGIN")  # one snapshot, as a recall reads
    for word in VOCAB[:2]:  # in most items: FTS5 weighs them 1e-6
        n, _ = recall._averages(conn.execute(f"SELECT block FROM memory_fts_{space}_data WHERE id = 1").fetchone()[0])
        held = conn.execute(f"SELECT count(*) FROM memory_fts_{space} WHERE memory_fts_{space} MATCH ?", (word,))
        assert recall_topk.fts5_idf(n, held.fetchone()[0]) <= 1e-6
    for kind, queries in (("common", common), ("rare", rare), ("mixed", mixed), ("left out", left_out)):
        for query in queries:
            for k, scope in ((1, None), (10, None), (40, None), (10, "agent")):
                walked, exact = _rankings(conn, space, query_terms(query), k, scope)
                if walked is None:
                    continue
                decided[kind] = decided.get(kind, 0) + 1
                assert [seq for seq, _ in walked] == [seq for seq, _ in exact], (query, k, scope)
                assert [s for _, s in walked] == pytest.approx([s for _, s in exact], rel=1e-12), (query, k, scope)
    conn.execute("COMMIT")
    assert decided["common"] >= 24 and decided["rare"] >= 44 and decided["left out"] >= 40, decided
