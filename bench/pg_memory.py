"""Memory recall on PostgreSQL: the plain-SQL BM25 index (runtime/store/postgres/recall.py) at scale.

    .venv/bin/python -m bench.pg_memory                    # 100k items (loading takes a minute or two)
    .venv/bin/python -m bench.pg_memory --sizes 10000,100000 --server postgresql://postgres@127.0.0.1:5432

The corpus and queries are bench/memory.py's (50-120 Zipf-distributed words per item from a 20k
vocabulary; three-word queries from the 3000 most frequent words, and the worst case, three of the
20 most frequent, each in most items). For each size it makes a database of its own, loads the
items through the index's own write path (``recall.index``, 1000 items per transaction), lets
PostgreSQL collect statistics (VACUUM ANALYZE, what autovacuum does on its own), then times recall
(top 10) through ``PostgresDatabase.read`` (a read-only snapshot: three round trips), the time to
add one item (one group-committed write, durable), and checks top-10 agreement with rank-bm25 given
Lucene's idf. Then semantic and hybrid recall at the largest size (``bench.memory_semantic`` in a
process of its own: recall p50 by mode, ``memory_remember`` with and without an embedder, embedding
throughput, resident memory; ``--no-semantic`` skips it). It prints the tables and exits 1 when a
target is missed: the keyword recall median at the largest size under 20 ms, and those of
``bench.memory_semantic``; and keyword recall (``rt.memory.recall`` on a PostgreSQL runtime) p50 <= 1.3x
a bare FTS5 ``bm25()`` query taking turns with it at 10k (``bench.recall_overhead``; ``--no-overhead``
skips it). First of all, ``memory_remember`` throughput and bytes per item on PostgreSQL beside the SQLite
store, taking turns in one run (``bench.remember_rate``, in a process of its own; targets >= 3,000
items/s and <= 3 KB per item; ``--no-remember`` skips it).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402
from rank_bm25 import BM25Okapi  # noqa: E402

from bench.memory import common_queries, corpus, extra_docs, queries  # noqa: E402
from runtime.memory.text import query_terms, tokenize  # noqa: E402
from runtime.store.core.dialect import POSTGRES  # noqa: E402
from runtime.store.postgres import PostgresDatabase, migrations, recall, schema  # noqa: E402
from runtime.store.postgres.executor import drive  # noqa: E402

TARGET_MS = 20.0
K = 10
LOAD_BATCH = 1000


class LuceneOkapi(BM25Okapi):  # type: ignore[misc]
    def _calc_idf(self, nd: dict[str, int]) -> None:
        self.idf = {t: math.log(1 + (self.corpus_size - df + 0.5) / (df + 0.5)) for t, df in nd.items()}


def ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.95) - 1] * 1000


async def _insert_items(conn: asyncpg.Connection, space: int, docs: list[str], first: int) -> list[int]:
    rows = await conn.fetch(
        "INSERT INTO memory_items (id, space_id, tenant, project, scope, uri, content, tags, created_at, updated_at)"
        " SELECT 'mem_' || n, $1, 't', 'p', 's', 'mem://' || n, c, '[]', 0, 0"
        " FROM unnest($2::text[]) WITH ORDINALITY AS u(c, n0), LATERAL (SELECT ($3 + n0)::text AS n) x"
        " RETURNING seq",
        space,
        docs,
        first,
    )
    return [int(r["seq"]) for r in rows]


async def run_size(server: str, n: int, nq: int) -> dict[str, float]:
    name = f"rath_bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(server + "/postgres")
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{server}/{name}"
    try:
        await migrations.apply(url, schema.MEMORY)
        db = PostgresDatabase(url, max_size=4)
        await db.open()
        try:
            return await _measure(db, url, n, nq)
        finally:
            await db.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _measure(db: PostgresDatabase, url: str, n: int, nq: int) -> dict[str, float]:
    async def new_space(conn: asyncpg.Connection) -> int:
        return int(await conn.fetchval("INSERT INTO memory_spaces (tenant, project) VALUES ('t', 'p') RETURNING id"))

    space = await db.write(new_space)
    docs = corpus(n)
    position: dict[int, int] = {}  # seq -> index in docs + extra_docs
    started = time.perf_counter()
    for at in range(0, n, LOAD_BATCH):
        part = docs[at : at + LOAD_BATCH]

        async def load(conn: asyncpg.Connection, part: list[str] = part, at: int = at) -> None:
            seqs = await _insert_items(conn, space, part, at)
            position.update((s, at + i) for i, s in enumerate(seqs))
            counts = [(s, recall.term_counts(d)) for s, d in zip(seqs, part, strict=True)]
            await drive(conn, recall.index(POSTGRES, space, counts))

        await db.write(load)
    load_s = time.perf_counter() - started
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()

    async def top(terms: list[str]) -> list[int]:
        async def fn(conn: asyncpg.Connection) -> list[int]:
            found = await drive(conn, recall.search(POSTGRES, space, terms, K, columns="top.seq"))
            return [int(r["seq"]) for r in found]

        return await db.read(fn)

    out: dict[str, float] = {"n": n, "load_s": load_s}
    for label, qs in (("recall", queries(nq)), ("common", common_queries(max(10, nq // 4)))):
        terms = [query_terms(q) for q in qs]
        for t in terms[:5]:  # warm the cache, as a running server's would be
            await top(t)
        times = []
        for t in terms:
            began = time.perf_counter()
            await top(t)
            times.append(time.perf_counter() - began)
        out[f"{label}_p50"], out[f"{label}_p95"] = ms(times)

    adds = []
    for i, d in enumerate(extra_docs(50)):

        async def add(conn: asyncpg.Connection, d: str = d, i: int = i) -> None:
            seqs = await _insert_items(conn, space, [d], n + 1_000_000 + i)
            position[seqs[0]] = n + i
            await drive(conn, recall.index(POSTGRES, space, [(seqs[0], Counter(tokenize(d)))]))

        began = time.perf_counter()
        await db.write(add)
        adds.append(time.perf_counter() - began)
    out["add_p50"], _ = ms(adds)

    # Agreement: the top 10 of 20 queries against rank-bm25 (Lucene idf) over the same tokens.
    all_docs = docs + extra_docs(50)
    okapi = LuceneOkapi([tokenize(d) for d in all_docs], k1=1.2, b=0.75)
    agree = []
    for q in queries(20):
        asked = query_terms(q)
        got = [position[s] for s in await top(asked)]
        scores = okapi.get_scores(asked)
        want = sorted(range(len(all_docs)), key=lambda i: (-scores[i], i))[:K]
        agree.append(len(set(got) & set(want)) / K)
    out["agree"] = statistics.mean(agree)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000", help="comma-separated item counts (default 100000)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432", help="server URL, no database")
    parser.add_argument("--no-semantic", action="store_true", help="skip semantic and hybrid recall")
    parser.add_argument("--no-overhead", action="store_true", help="skip recall against a bare FTS5 query")
    parser.add_argument("--no-remember", action="store_true", help="skip remember throughput beside SQLite")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    ok = True
    if not args.no_remember:  # the write side first, on a quiet database: its own process, its own databases
        from bench import remember_rate

        remembered = remember_rate.run_child(args.server.rstrip("/"), items=2000, rounds=3)
        print("\n".join(remember_rate.table(remembered)), flush=True)
        ok = all(met for _, met in remember_rate.verdicts(remembered))
    rows = [asyncio.run(run_size(args.server.rstrip("/"), n, args.queries)) for n in sizes]
    head = (
        f"{'items':>8} {'load s':>7} {'recall p50':>11} {'p95':>7} {'common p50':>11} {'p95':>7}"
        f" {'add p50':>8} {'top10 agree':>12}"
    )
    print(head)
    for r in rows:
        print(
            f"{int(r['n']):>8} {r['load_s']:>7.1f} {r['recall_p50']:>9.2f}ms {r['recall_p95']:>5.1f}ms"
            f" {r['common_p50']:>9.1f}ms {r['common_p95']:>5.1f}ms {r['add_p50']:>6.2f}ms {r['agree']:>12.3f}"
        )
    worst = rows[-1]
    recall_ok = worst["recall_p50"] < TARGET_MS
    print(
        f"recall median at {int(worst['n'])} items: {worst['recall_p50']:.2f} ms (target < {TARGET_MS:.0f} ms): "
        + ("met" if recall_ok else "MISSED")
    )
    ok = ok and recall_ok
    if not args.no_overhead:  # keyword recall and a bare FTS5 query taking turns, in a process of their own
        from bench import recall_overhead

        overhead = recall_overhead.run_child(args.server.rstrip("/"), [10_000])
        print("\n".join(recall_overhead.table(overhead)), flush=True)
        ok = all([ok, *(met for r in overhead for _, met in recall_overhead.verdicts(r))])
    if not args.no_semantic:  # semantic and hybrid rows at the largest size, in a process of their own
        from bench import memory_semantic

        semantic = memory_semantic.run_child(args.server.rstrip("/"), max(sizes), rounds=4)
        print("\n".join(memory_semantic.table(semantic)), flush=True)
        ok = all([ok, *(met for _, met in memory_semantic.verdicts(semantic))])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
