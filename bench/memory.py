"""Memory benchmark: our FTS5 store vs rank-bm25 vs OpenRath 2.0.0's local memory backend.

    .venv/bin/python -m bench.memory                       # 1k, 10k, 100k items (~20 min, mostly OpenRath)
    .venv/bin/python -m bench.memory --sizes 1000,10000     # quicker

For each size, every system runs in a fresh process of its own (so resident memory is its own)
on the same corpus (50-120 Zipf-distributed words per item, as /work/shared/peers/openrath_memory.py)
and the same three-word queries, and reports: recall median and p95 (top 10), the time to add
one item to a store already holding N, peak resident memory, and for ours the top-10 agreement
with rank-bm25 on the same tokens (given the IDF our store uses, Lucene's, always positive:
``tests.memory.oracle``; its own term counts, lengths and tf formula otherwise). What "add one"
means differs by design, and that is the point:
- ours: one ``rt.memory.remember`` call, committed to disk (synchronous=FULL), searchable at once
  (taking turns with a bare FTS5 INSERT committed the same way, printed beside the target);
- rank-bm25: it has no incremental add: the index is rebuilt over N+1 documents;
- OpenRath: one ``MemoryOpWrite`` dispatch to ``LocalMemoryBackend`` (a file per item).
Loading the N items is not timed for us as "add": we load them concurrently (group-committed).
Then semantic and hybrid recall at the largest size (``bench.memory_semantic``, SQLite, in a process
of its own; ``--no-semantic`` skips it), and keyword recall against a bare FTS5 ``bm25()`` query taking
turns with it at 10k (and 100k when measured; ``bench.recall_overhead``, ``--no-overhead`` skips it).
Exits 1 when a target is missed: at 100k, keyword recall median < 20 ms and add one < 2 ms; recall
p50 <= 1.3x the bare query; and those of ``bench.memory_semantic``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._peer import run_peer  # noqa: E402

SEED = 1
VOCAB_SIZE = 20_000
K = 10


def _documents(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    vocab = [f"w{i}" for i in range(VOCAB_SIZE)]
    cumulative = list(itertools.accumulate(1 / (i + 1) for i in range(VOCAB_SIZE)))  # = weights=1/(i+1), fast
    return [" ".join(rnd.choices(vocab, cum_weights=cumulative, k=rnd.randint(50, 120))) for _ in range(n)]


def corpus(n: int) -> list[str]:
    """The documents: the same generator for every system (deterministic)."""
    return _documents(n, SEED)


def queries(count: int) -> list[str]:
    rnd = random.Random(SEED + 1)
    return [" ".join(f"w{i}" for i in rnd.sample(range(3000), 3)) for _ in range(count)]


def common_queries(count: int) -> list[str]:
    """The worst case for an inverted index: three of the 20 most frequent words (each in most items)."""
    rnd = random.Random(SEED + 3)
    return [" ".join(f"w{i}" for i in rnd.sample(range(20), 3)) for _ in range(count)]


def extra_docs(count: int) -> list[str]:
    """Documents added one at a time after loading (a different seed: not copies of the corpus)."""
    return _documents(count, SEED + 2)


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def fsync_ms(samples: int = 100) -> float:
    """Median latency of one fsync of a 4 KiB append on this disk now: the floor of a durable commit."""
    with tempfile.NamedTemporaryFile(dir=ROOT / "bench") as f:
        times = []
        for _ in range(samples):
            f.write(b"x" * 4096)
            f.flush()
            a = time.perf_counter()
            os.fsync(f.fileno())
            times.append(time.perf_counter() - a)
    return statistics.median(times) * 1000


def stats_ms(seconds: list[float]) -> tuple[float, float]:
    ms = sorted(s * 1000 for s in seconds)
    return statistics.median(ms), ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]


# -- workers (each runs in its own process) ----------------------------------------------------
def work_ours(n: int, nq: int, adds: int, synchronous: str = "FULL") -> dict[str, Any]:
    """Ours, each timed query and add taking turns with its bare FTS5 counterpart on a plain FTS5 table of
    the same corpus in the same directory (``bench.recall_overhead.bare_index``): a ``bm25()`` query, and
    an INSERT committed at the same ``synchronous`` (which goes first alternates)."""
    import anyio

    from bench.recall_overhead import BARE, bare_index
    from runtime import Runtime
    from runtime.memory.text import match_expression, query_terms

    docs, qs = corpus(n), queries(nq)

    def turns(i: int, ours: Any, bare: Any) -> list[Any]:
        return [ours, bare] if i % 2 else [bare, ours]

    async def main() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as home:
            bare = bare_index(Path(home) / "bare.db", docs)
            bare.execute(f"PRAGMA synchronous={synchronous}")

            def bare_query(q: str) -> None:
                bare.execute(BARE, (match_expression(query_terms(q)), K)).fetchall()

            async with Runtime.open(Path(home) / "rt", synchronous=synchronous, embedder="none") as rt:
                t0 = time.perf_counter()
                for start in range(0, n, 1000):
                    async with anyio.create_task_group() as tg:
                        for i in range(start, min(n, start + 1000)):
                            tg.start_soon(lambda i=i: rt.memory.remember(docs[i], path=f"d{i}"))
                load_s = time.perf_counter() - t0
                await rt.memory.recall(qs[0], k=K)  # warm-up, not timed
                bare_query(qs[0])
                times: list[float] = []
                bare_times: list[float] = []
                tops, top_scores = [], []
                cpu = 0.0
                for i, q in enumerate(qs):
                    for which in turns(i, "ours", "bare"):
                        a, c = time.perf_counter(), time.process_time()
                        if which == "bare":
                            bare_query(q)
                            bare_times.append(time.perf_counter() - a)
                            continue
                        hits = await rt.memory.recall(q, k=K)
                        times.append(time.perf_counter() - a)
                        cpu += time.process_time() - c
                        tops.append([int(h.uri.rsplit("/d", 1)[1]) for h in hits])
                        top_scores.append([h.score for h in hits])
                common: list[float] = []
                bare_common: list[float] = []
                for i, q in enumerate(common_queries(10)):
                    for which in turns(i, "ours", "bare"):
                        a = time.perf_counter()
                        if which == "bare":
                            bare_query(q)
                            bare_common.append(time.perf_counter() - a)
                        else:
                            await rt.memory.recall(q, k=K)
                            common.append(time.perf_counter() - a)
                add_times: list[float] = []
                bare_adds: list[float] = []
                for i, doc in enumerate(extra_docs(adds)):
                    for which in turns(i, "ours", "bare"):
                        a = time.perf_counter()
                        if which == "bare":
                            bare.execute("INSERT INTO f (rowid, body) VALUES (?, ?)", (n + 1 + i, doc))
                            bare_adds.append(time.perf_counter() - a)
                        else:
                            await rt.memory.remember(doc, path=f"extra/{i}")
                            add_times.append(time.perf_counter() - a)
                bare.close()
                return {
                    "load_s": load_s,
                    "recall": times,
                    "recall_cpu": cpu / len(qs),
                    "common": common,
                    "add": add_times,
                    "tops": tops,
                    "top_scores": top_scores,
                    "bare_recall": bare_times,
                    "bare_common": bare_common,
                    "bare_add": bare_adds,
                }

    out = anyio.run(main)
    return {**out, "rss_mb": peak_rss_mb()}


def work_rank_bm25(n: int, nq: int, adds: int) -> dict[str, Any]:
    import numpy as np

    from runtime.memory.text import query_terms, tokenize
    from tests.memory.oracle import LuceneIdfBM25

    docs, qs = [tokenize(d) for d in corpus(n)], queries(nq)
    t0 = time.perf_counter()
    bm25 = LuceneIdfBM25(docs)
    load_s = time.perf_counter() - t0
    times, tops, top_scores = [], [], []
    cpu0 = time.process_time()
    for q in qs:
        a = time.perf_counter()
        scores = bm25.get_scores(query_terms(q))
        top = np.argsort(-scores)[:K]
        top = [int(i) for i in top if scores[i] > 0]
        times.append(time.perf_counter() - a)
        tops.append(top)
        top_scores.append([float(scores[i]) for i in top])
    cpu = (time.process_time() - cpu0) / len(qs)
    add_times = []
    for doc in extra_docs(max(1, min(adds, 3 if n >= 50_000 else 10))):
        docs.append(tokenize(doc))
        a = time.perf_counter()
        bm25 = LuceneIdfBM25(docs)
        add_times.append(time.perf_counter() - a)
    return {
        "load_s": load_s,
        "recall": times,
        "recall_cpu": cpu,
        "add": add_times,
        "tops": tops,
        "top_scores": top_scores,
        "rss_mb": peak_rss_mb(),
    }


PEER = r"""
import json, random, statistics, sys, tempfile, time
from pathlib import Path
from rath.memory import MemoryStoreSpec, MemoryOpWrite, MemoryOpFind
from rath.memory.adapters.local import LocalMemoryBackend
docs, qs, extra = json.loads(Path(sys.argv[1]).read_text())
be = LocalMemoryBackend()
st = be.open(MemoryStoreSpec(options={"path": tempfile.mkdtemp()}))
t0 = time.perf_counter()
for i, d in enumerate(docs):
    be.dispatch(st, MemoryOpWrite(uri=f"memory://user/memories/bench/d{i}", content=d))
load_s = time.perf_counter() - t0
be.dispatch(st, MemoryOpFind(query=qs[0], top_k=10))
times = []
cpu0 = time.process_time()
for q in qs:
    a = time.perf_counter(); be.dispatch(st, MemoryOpFind(query=q, top_k=10)); times.append(time.perf_counter() - a)
cpu = (time.process_time() - cpu0) / len(qs)
add = []
for i, d in enumerate(extra):
    a = time.perf_counter()
    be.dispatch(st, MemoryOpWrite(uri=f"memory://user/memories/bench/extra{i}", content=d))
    add.append(time.perf_counter() - a)
hwm = [l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM:")][0]
rss = int(hwm.split()[1]) / 1024
print(json.dumps({"load_s": load_s, "recall": times, "recall_cpu": cpu, "add": add, "rss_mb": rss}))
"""


def work_openrath(n: int, nq: int, adds: int) -> dict[str, Any]:
    """OpenRath in its own venv (``bench._peer``); the corpus goes through a JSON file."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump([corpus(n), queries(nq), extra_docs(adds)], f)
        f.flush()
        out = run_peer(PEER, f.name, timeout=7200)
    return dict(json.loads(out.strip().splitlines()[-1]))


def work_ours_normal(n: int, nq: int, adds: int) -> dict[str, Any]:
    """Ours with synchronous=NORMAL: no fsync per commit, so 'add one' is our own cost, not the disk's."""
    return work_ours(n, nq, adds, synchronous="NORMAL")


CHECK_ITEMS = ["用户喜欢用Python做机器学习", "東京でラーメンを食べるのが好きです", "The user likes ramen in Tokyo"]
CHECK_QUERIES = ["机器学习", "ラーメン", "kubernetes"]  # Chinese, Japanese, a word no item contains

PEER_CHECK = r"""
import json, sys, tempfile
from rath.memory import MemoryStoreSpec, MemoryOpWrite, MemoryOpFind
from rath.memory.adapters.local import LocalMemoryBackend
items, qs = json.loads(sys.argv[1])
be = LocalMemoryBackend()
st = be.open(MemoryStoreSpec(options={"path": tempfile.mkdtemp()}))
for i, text in enumerate(items):
    be.dispatch(st, MemoryOpWrite(uri=f"memory://user/memories/check/i{i}", content=text))
out = {}
for q in qs:
    hits = be.dispatch(st, MemoryOpFind(query=q, top_k=10)).hits
    out[q] = [[h.uri.rsplit("/", 1)[1], h.score] for h in hits]
print(json.dumps(out))
"""


def behaviour_checks(peer: bool) -> list[str]:
    """Same three items and queries in ours and OpenRath: CJK recall and zero-score hits."""
    import anyio

    from runtime import Runtime

    async def ours() -> dict[str, list[tuple[str, float]]]:
        with tempfile.TemporaryDirectory() as home:
            async with Runtime.open(home) as rt:
                for i, item in enumerate(CHECK_ITEMS):
                    await rt.memory.remember(item, path=f"check/i{i}")
                return {
                    q: [(h.uri.rsplit("/", 1)[1], h.score) for h in await rt.memory.recall(q, k=10)]
                    for q in CHECK_QUERIES
                }

    results = {"ours": anyio.run(ours)}
    if peer:
        results["openrath"] = json.loads(run_peer(PEER_CHECK, json.dumps([CHECK_ITEMS, CHECK_QUERIES])).strip())
    lines = [f"items: {CHECK_ITEMS}"]
    for system, found in results.items():
        shown = "; ".join(
            f"{q!r} -> " + (", ".join(f"{uri} ({score:.3g})" for uri, score in found[q]) or "nothing")
            for q in CHECK_QUERIES
        )
        lines.append(f"  {system:<9} {shown}")
    return lines


WORKERS = {"ours": work_ours, "ours-nosync": work_ours_normal, "rank-bm25": work_rank_bm25}


def run_worker(system: str, n: int, nq: int, adds: int) -> dict[str, Any]:
    """One measurement in a fresh process, so peak RSS is that system's alone."""
    if system == "openrath":
        return work_openrath(n, nq, adds)
    cmd = [sys.executable, __file__, "--worker", system, "--sizes", str(n), "--queries", str(nq), "--adds", str(adds)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"{system} worker failed at n={n}:\n{out.stderr[-4000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def agreement(ours: list[list[int]], oracle: list[list[int]]) -> float:
    pairs = [(set(a), set(b)) for a, b in zip(ours, oracle, strict=True) if b]
    return sum(len(a & b) / len(b) for a, b in pairs) / max(len(pairs), 1)


def same_scores(ours: list[list[float]], oracle: list[list[float]]) -> float:
    """Share of queries whose ten best scores equal the oracle's, rank by rank (to 1e-9): the same
    ranking up to the order of tied items, which the two break differently."""

    def equal(a: list[float], b: list[float]) -> bool:
        return len(a) == len(b) and all(abs(x - y) <= 1e-9 * max(abs(y), 1e-300) for x, y in zip(a, b, strict=True))

    return sum(equal(a, b) for a, b in zip(ours, oracle, strict=True)) / max(len(oracle), 1)


def fmt_ms(ms: float) -> str:
    return f"{ms:,.2f} ms" if ms < 100 else f"{ms:,.0f} ms"


def report(n: int, results: dict[str, dict[str, Any]]) -> list[str]:
    ours = results["ours"]
    o_med, _ = stats_ms(ours["recall"])
    o_add, _ = stats_ms(ours["add"])
    rows = []
    for system, r in results.items():
        med, p95 = stats_ms(r["recall"])
        add, _ = stats_ms(r["add"])
        oracle = results["rank-bm25"]
        agree = (
            f"{agreement(r['tops'], oracle['tops']):.3f} / {same_scores(r['top_scores'], oracle['top_scores']):.3f}"
            if system.startswith("ours")
            else ""
        )
        rows.append(
            f"{n:>8,}  {system:<11} {fmt_ms(med):>12} {fmt_ms(p95):>12} {fmt_ms(r['recall_cpu'] * 1000):>12}"
            f" {med / o_med:>8.1f}x "
            f"{fmt_ms(add):>12} {add / o_add:>9.1f}x {r['rss_mb']:>8.0f} MB {len(r['recall']):>4}  {agree}"
        )
    return rows


HEADER = (
    f"{'items':>8}  {'system':<11} {'recall p50':>12} {'recall p95':>12} {'recall CPU':>12} {'vs ours':>9} "
    f"{'add one':>12} {'vs ours':>10} {'peak RSS':>11} {'qs':>4}  top-10 = bm25 (ids / scores)"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=50, help="recall queries per size (ours, rank-bm25)")
    parser.add_argument("--peer-queries", type=int, default=10, help="recall queries per size for OpenRath")
    parser.add_argument("--adds", type=int, default=200, help="single adds timed per size (ours)")
    parser.add_argument("--no-peer", action="store_true", help="skip OpenRath")
    parser.add_argument(
        "--no-semantic", action="store_true", help="skip semantic and hybrid recall (bench.memory_semantic)"
    )
    parser.add_argument("--no-overhead", action="store_true", help="skip recall against a bare FTS5 query")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.worker:
        print(json.dumps(WORKERS[args.worker](sizes[0], args.queries, args.adds)))
        return 0
    missed: list[str] = []
    print("behaviour (expected: i0 for 机器学习, i1 for ラーメン, nothing for kubernetes):")
    print("\n".join(behaviour_checks(not args.no_peer)), flush=True)
    print(f"disk: one fsync takes {fsync_ms():.2f} ms (median) right now; ours pays one per remember() commit")
    print("load average at start: {:.1f} {:.1f} {:.1f} on {} CPUs".format(*os.getloadavg(), os.cpu_count()))
    for n in sizes:
        results = {
            "ours": run_worker("ours", n, args.queries, args.adds),
            "ours-nosync": run_worker("ours-nosync", n, args.queries, args.adds),
            "rank-bm25": run_worker("rank-bm25", n, args.queries, args.adds),
        }
        if not args.no_peer:
            results["openrath"] = run_worker("openrath", n, args.peer_queries, 20)
        rows = report(n, results)
        ours = results["ours"]
        worst, _ = stats_ms(ours["common"])
        rows.append(
            f"{'':>10}ours, worst case (3 of the 20 commonest words, each in most items): median {fmt_ms(worst)}"
            f" (bare FTS5, taking turns: {fmt_ms(stats_ms(ours['bare_common'])[0])})"
        )
        print("\n".join(([HEADER] if n == sizes[0] else []) + rows), flush=True)
        if n >= 100_000:
            med, add = stats_ms(ours["recall"])[0], stats_ms(ours["add"])[0]
            bare_med, bare_add = stats_ms(ours["bare_recall"])[0], stats_ms(ours["bare_add"])[0]
            print(
                f"{'':>10}targets at {n:,}: recall median {med:.2f} ms (bare FTS5 {bare_med:.2f} ms) < 20 ms:"
                f" {'met' if med < 20 else 'MISSED'}; add one {add:.2f} ms (bare FTS5 insert + commit"
                f" {bare_add:.2f} ms) < 2 ms: {'met' if add < 2 else 'MISSED'}"
            )
            missed += [f"keyword recall median at {n:,}"] * (med >= 20) + [f"add one at {n:,}"] * (add >= 2)
    if not args.no_overhead:  # keyword recall and a bare FTS5 query taking turns, in a process of their own
        from bench import recall_overhead

        overhead = recall_overhead.run_child(None, [n for n in sizes if n in (10_000, 100_000)] or [10_000])
        print("\n".join(recall_overhead.table(overhead)), flush=True)
        missed += [text for r in overhead for text, ok in recall_overhead.verdicts(r) if not ok]
    if not args.no_semantic:  # semantic and hybrid rows at the largest size, in a process of their own
        from bench import memory_semantic  # it reads this module's corpus

        semantic = memory_semantic.run_child(None, max(sizes), rounds=4)
        print("\n".join(memory_semantic.table(semantic)), flush=True)
        missed += [text for text, ok in memory_semantic.verdicts(semantic) if not ok]
    print("load average at end: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    print(
        "\n'vs ours' = that system's time / ours (higher is slower). 'add one' is the median of single adds to a"
        " store of N: ours commits one remember() to disk; rank-bm25 must rebuild its index; OpenRath writes a file."
        " ours-nosync is ours with synchronous=NORMAL (no fsync per commit; survives a crash, not a power cut)."
        " 'recall CPU' is process CPU time per query (less sensitive to other load than wall time)."
        " 'top-10 = bm25' compares with rank-bm25 given Lucene's IDF, as ours: the mean share of its top 10 ids that"
        " ours also returns, and the share of queries whose ten scores equal its ten, rank by rank (ties between"
        " equal-scored items are broken differently, which is all that lowers the first figure)."
    )
    if missed:
        print("MISSED: " + "; ".join(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
