"""Semantic recall's speed at scale (issue 30): where the milliseconds of one recall go.

    .venv/bin/python -m bench.semantic_speed --items 100000            # SQLite, a temporary home
    .venv/bin/python -m bench.semantic_speed --items 100000 --store postgresql://…   # migrated, empty

Items are synthetic sentences; their vectors are random unit vectors stored through the store's own
``save`` (embedding 100k items with the local model takes far longer than the point here: that is
``embed/s`` below, measured on a batch). Reports, medians over the queries: the query's embedding
(and its CPU time, which the machine's load does not change), a search of a warm index (the stamp
read, the matrix scan, the items read), a hybrid recall through the service, the first search of a
cold process (reading every vector), the matrix's size, and embedding throughput.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime import Runtime  # noqa: E402
from runtime.memory.embed import LocalEmbedder  # noqa: E402
from runtime.memory.semantic import Semantic  # noqa: E402
from runtime.memory.space_index import quantize  # noqa: E402
from runtime.memory.store import NewMemory  # noqa: E402

WORDS = [f"w{i}" for i in range(5000)]  # each query word is in a few hundred items of 100k, as real words are


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms"


async def remember_p50(embedder: str) -> float:
    """``memory_remember``'s median over 300 calls on a fresh SQLite home, with or without an embedder
    (with one, the background task embeds while the calls go on)."""
    with tempfile.TemporaryDirectory() as tmp:
        async with Runtime.open(Path(tmp) / "home", workers=0, embedder=embedder) as rt:
            times = []
            for i in range(300):
                started = time.perf_counter()
                await rt.memory.remember(f"fact number {i} about the user and their preferences")
                times.append(time.perf_counter() - started)
            return statistics.median(times)


async def run(items: int, store: str | None, queries: int) -> None:
    plain, embedding = await remember_p50("none"), await remember_p50("local")
    print(f"remember p50: {plain * 1e6:.0f} us without an embedder, {embedding * 1e6:.0f} us with the local one")
    rnd = random.Random(1)
    embedder = LocalEmbedder()
    batch = [" ".join(rnd.choices(WORDS, k=12)) for _ in range(64)]
    started = time.perf_counter()
    embedder.passages(batch)
    print(f"embed/s: {len(batch) / (time.perf_counter() - started):.0f} items/s (a batch of 64, one core)")
    with tempfile.TemporaryDirectory() as tmp:
        async with Runtime.open(Path(tmp) / "home", store=store, workers=0, embedder="none") as rt:
            memory = rt.memory.store
            started = time.perf_counter()
            for start in range(0, items, 2000):
                await memory.put(
                    [
                        NewMemory(f"memory://user/i{n}", "user", " ".join(rnd.choices(WORDS, k=12)) + f" n{n}")
                        for n in range(start, min(items, start + 2000))
                    ]
                )
            vectors, after = memory.vectors(), 0
            while rows := await vectors.pending(embedder.model, after, 5000):
                made = np.random.default_rng(after).standard_normal((len(rows), 384)).astype(np.float32)
                made /= np.linalg.norm(made, axis=1, keepdims=True)
                packed = quantize(made)
                await vectors.save(
                    embedder.model, [(int(r["seq"]), r["digest"], s, b) for r, (s, b) in zip(rows, packed, strict=True)]
                )
                after = int(rows[-1]["seq"])
            print(f"loaded {items} items and vectors in {time.perf_counter() - started:.0f} s")
            semantic = Semantic(embedder)
            rt.memory.semantic = semantic
            started = time.perf_counter()
            await semantic.search(memory, ("local", "default"), "warm up", 10, None)
            print(f"cold search (reads every vector): {(time.perf_counter() - started) * 1000:.0f} ms")
            index = next(iter(semantic._indexes.values()))
            print(f"index: {index.size} vectors, int8 matrix {index.matrix.nbytes / 2**20:.0f} MiB")
            texts = [" ".join(rnd.choices(WORDS, k=3)) for _ in range(queries)]
            qv = embedder.query("a query")
            scans, scan_cpu = [], []
            for _ in range(queries):
                t0, c0 = time.perf_counter(), time.process_time()
                index.top(qv, 83, None)
                scans.append(time.perf_counter() - t0)
                scan_cpu.append(time.process_time() - c0)
            print(f"matrix scan alone p50 {ms(scans)} (CPU time {ms(scan_cpu)})")
            embed, embed_cpu, search, hybrid = [], [], [], []
            for text in texts:
                t0, c0 = time.perf_counter(), time.process_time()
                await anyio.to_thread.run_sync(embedder.query, text)
                t1 = time.perf_counter()
                embed_cpu.append(time.process_time() - c0)  # every thread's: the engine's OpenMP threads too
                await semantic.search(memory, ("local", "default"), text, 10, None)
                t2 = time.perf_counter()
                await rt.memory.recall(text, k=10, mode="hybrid")
                t3 = time.perf_counter()
                embed.append(t1 - t0)
                search.append(t2 - t1 - (t1 - t0))  # the search embeds the query too: count it once
                hybrid.append(t3 - t2)
            print(f"query embedding p50 {ms(embed)} (CPU time {ms(embed_cpu)}); warm search less it {ms(search)};")
            print(f"hybrid recall of a query just embedded (its vector kept) {ms(hybrid)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--store", help="a store URL (default: a SQLite file in a temporary home)")
    args = parser.parse_args()
    anyio.run(run, args.items, args.store, args.queries)


if __name__ == "__main__":
    main()
