"""Keyword recall against a bare FTS5 query, in the same process, query by query (issue 31).

    .venv/bin/python -m bench.recall_overhead                          # SQLite, 10k items
    .venv/bin/python -m bench.recall_overhead --sizes 10000,100000 --store postgresql://postgres@127.0.0.1:5432

The anchor is what a keyword recall cannot do with less: one ``bm25()`` query on a plain FTS5 table of
the same corpus (bench/memory.py's: 50-120 Zipf-distributed words per item), top 10 by FTS5's own
ranking, run right here on the event loop's thread (no reader thread, no rows beyond rowid and score).
A PostgreSQL database is vacuumed and analyzed after loading (what autovacuum does on its own).
Ours is ``rt.memory.recall(query, k=10)`` (keyword mode) on a runtime over a fresh SQLite home or a
fresh PostgreSQL database: the query's terms, the store's BM25 (Lucene's IDF, equal to rank-bm25's),
the items' rows and their snippets. The two take turns query by query (which goes first alternates),
so a burst of other load on this shared machine lands on both; medians are compared. Two query sets:
three words among the 3,000 most frequent (typical), and three of the 20 most frequent, each in most
items (the tail). Target (issue 31): ours <= 1.3x the bare query at each size, both sets; exits 1
when one is missed. ``--json`` prints the figures as one JSON line (bench.memory and bench.pg_memory
run this in a process of their own).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.memory import common_queries, corpus, queries  # noqa: E402
from bench.memory_semantic import a_store  # noqa: E402
from runtime import Runtime  # noqa: E402
from runtime.memory.store import NewMemory  # noqa: E402
from runtime.memory.text import match_expression, query_terms  # noqa: E402

TARGET = 1.3
K = 10
BARE = "SELECT rowid, bm25(f) AS score FROM f WHERE f MATCH ? ORDER BY score LIMIT ?"


def bare_index(path: Path, docs: list[str]) -> sqlite3.Connection:
    """A plain FTS5 table of ``docs`` (WAL, as ours), the anchor's."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(body, tokenize='unicode61')")
    db.execute("BEGIN")
    db.executemany("INSERT INTO f (rowid, body) VALUES (?, ?)", enumerate(docs, 1))
    db.execute("COMMIT")
    return db


async def measure(server: str | None, n: int, nq: int) -> dict[str, Any]:
    docs = corpus(n)
    out: dict[str, Any] = {"items": n, "store": "postgresql" if server else "sqlite"}
    async with a_store(server) as (home, store):
        home.mkdir(parents=True)
        bare = bare_index(home.parent / "bare.db", docs)
        async with Runtime.open(home, store=store, workers=0, embedder="none") as rt:
            for at in range(0, n, 2000):
                part = enumerate(docs[at : at + 2000], at)
                await rt.memory.store.put([NewMemory(f"memory://user/i{i}", "user", d) for i, d in part])
            if store is not None:  # the statistics and visibility map autovacuum would have made by now
                import asyncpg

                conn = await asyncpg.connect(store)
                try:
                    await conn.execute("VACUUM ANALYZE")
                finally:
                    await conn.close()
            for label, qs in (("typical", queries(nq)), ("common", common_queries(max(10, nq // 5)))):
                for q in qs[:5]:  # warm both: pages in the cache, statements prepared
                    await rt.memory.recall(q, k=K)
                    bare.execute(BARE, (match_expression(query_terms(q)), K)).fetchall()
                ours, anchor = [], []
                for i, q in enumerate(qs):
                    for which in (0, 1) if i % 2 else (1, 0):
                        began = time.perf_counter()
                        if which:
                            await rt.memory.recall(q, k=K)
                            ours.append(time.perf_counter() - began)
                        else:
                            bare.execute(BARE, (match_expression(query_terms(q)), K)).fetchall()
                            anchor.append(time.perf_counter() - began)
                out[label] = {"ours_ms": statistics.median(ours) * 1000, "bare_ms": statistics.median(anchor) * 1000}
        bare.close()
    return out


def verdicts(r: dict[str, Any]) -> list[tuple[str, bool]]:
    named = [(label, r[label]) for label in ("typical", "common")]
    return [
        (
            f"{r['store']} {label} recall p50 at {r['items']:,} <= {TARGET}x bare FTS5",
            m["ours_ms"] <= TARGET * m["bare_ms"],
        )
        for label, m in named
    ]


def table(results: list[dict[str, Any]]) -> list[str]:
    lines = [f"{'store':<11} {'items':>8} {'queries':<8} {'ours p50':>10} {'bare FTS5':>10} {'ratio':>7}  target"]
    for r in results:
        for label in ("typical", "common"):
            m = r[label]
            ratio = m["ours_ms"] / m["bare_ms"]
            lines.append(
                f"{r['store']:<11} {r['items']:>8,} {label:<8} {m['ours_ms']:>7.2f} ms {m['bare_ms']:>7.2f} ms"
                f" {ratio:>6.2f}x  <= {TARGET}x: {'met' if ratio <= TARGET else 'MISSED'}"
            )
    return lines


def run_child(server: str | None, sizes: list[int], nq: int = 200) -> list[dict[str, Any]]:
    """Measure in a process of its own, one size after another."""
    argv = [sys.executable, "-m", "bench.recall_overhead", "--json", "--queries", str(nq)]
    argv += ["--sizes", ",".join(map(str, sizes))] + (["--store", server] if server else [])
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench.recall_overhead failed:\n{done.stderr[-3000:]}")
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000", help="comma-separated item counts")
    parser.add_argument("--store", help="a PostgreSQL server URL without a database (default: SQLite)")
    parser.add_argument("--queries", type=int, default=200, help="typical queries per size (common: a fifth)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()
    server = args.store.rstrip("/") if args.store else None
    start = "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    results = [anyio.run(measure, server, int(n), args.queries) for n in args.sizes.split(",")]
    if args.json:
        print(json.dumps(results))
        return 0
    end = "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    print(f"load average at start: {start}, at end: {end}")
    print("\n".join(table(results)))
    return 0 if all(ok for r in results for _, ok in verdicts(r)) else 1


if __name__ == "__main__":
    sys.exit(main())
