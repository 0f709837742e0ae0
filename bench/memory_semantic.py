"""Semantic and hybrid recall at scale, and what an embedder costs a write (issue 30).

    .venv/bin/python -m bench.memory_semantic                                   # SQLite, 100k items
    .venv/bin/python -m bench.memory_semantic --store postgresql://postgres@127.0.0.1:5432   # PostgreSQL
    .venv/bin/python -m bench.memory_semantic --items 10000 --rounds 3           # quicker

``bench.memory`` runs it on SQLite and ``bench.pg_memory`` on PostgreSQL (``--no-semantic`` skips
it there). One process (so its resident memory is the store's, the model's and the index's):

- loads ``--items`` items of ``bench.memory``'s corpus through ``memory.put`` (on PostgreSQL into a
  database of its own, dropped afterwards), and a random unit vector for each through the store's
  own ``save`` (embedding 100k items with the local model would take half an hour; a scan costs the
  same whatever the vectors), then opens the runtime with the local embedder;
- recall p50 (top 10) by mode, interleaved query by query over ``--rounds`` rounds: ``keyword`` is
  the baseline, ``semantic`` and ``hybrid`` are what the target is about, and the query's embedding
  alone is shown beside them (the model's real cost on a real query; its CPU time too, which the
  load of the machine does not change), then hybrid again for each query already asked (its vector
  kept: no embedding);
- ``memory_remember`` p50 with the local embedder (embedding in the background) and with none, two
  runtimes on two fresh stores taking turns write by write;
- embedding throughput on one core (passages of the labelled set, batches of 16);
- resident memory of the process after the queries, and the index's own size.

Targets: semantic and hybrid recall p50 <= 20 ms; remember p50 with an embedder within +/-10% of
without. Exits 1 when one is missed. ``--json`` prints the figures as one JSON line instead.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.memory import corpus, queries  # noqa: E402
from bench.recall_quality_set import DISTRACTORS, PAIRS  # noqa: E402
from runtime import Runtime  # noqa: E402
from runtime.memory.embed import LocalEmbedder  # noqa: E402
from runtime.memory.space_index import quantize  # noqa: E402
from runtime.memory.store import NewMemory  # noqa: E402

TARGET_MS = 20.0
REMEMBER_BAND = 0.10
MODES = ("keyword", "semantic", "hybrid")
K = 10


def rss_mb() -> float:
    """This process's resident memory now."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


@asynccontextmanager
async def a_store(server: str | None) -> AsyncIterator[tuple[Path, str | None]]:
    """A fresh home, and a fresh PostgreSQL database on ``server`` (None: the home's SQLite file)."""
    with tempfile.TemporaryDirectory() as tmp:
        if server is None:
            yield Path(tmp) / "home", None
            return
        import asyncpg

        name = f"rath_bench_sem_{uuid.uuid4().hex[:10]}"
        admin = await asyncpg.connect(server + "/postgres")
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
            try:
                from runtime.store.postgres import migrations
                from runtime.store.postgres.schema import ALL

                await migrations.apply(f"{server}/{name}", ALL)
                yield Path(tmp) / "home", f"{server}/{name}"
            finally:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def load(home: Path, store: str | None, n: int, model: str) -> float:
    """``n`` items of the corpus and a random unit vector of ``model`` for each; returns seconds."""
    import numpy as np

    started = time.perf_counter()
    async with Runtime.open(home, store=store, workers=0, embedder="none") as rt:
        docs = corpus(n)
        for at in range(0, n, 2000):
            await rt.memory.store.put(
                [NewMemory(f"memory://user/i{at + i}", "user", d) for i, d in enumerate(docs[at : at + 2000])]
            )
        vectors, after = rt.memory.store.vectors(), 0
        while rows := await vectors.pending(model, after, 5000):
            made = np.random.default_rng(after).standard_normal((len(rows), 384)).astype(np.float32)
            made /= np.linalg.norm(made, axis=1, keepdims=True)
            packed = quantize(made)
            made_rows = [(int(r["seq"]), r["digest"], s, b) for r, (s, b) in zip(rows, packed, strict=True)]
            await vectors.save(model, made_rows)
            after = int(rows[-1]["seq"])
    return time.perf_counter() - started


def throughput(embedder: LocalEmbedder, seconds: float = 8.0) -> float:
    """Items embedded per second on one core (``passages`` sets one OpenMP thread), batches of 16."""
    texts = [fact for _, fact in PAIRS] + list(DISTRACTORS)
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        batch = [texts[(done + i) % len(texts)] for i in range(16)]
        embedder.passages(batch)
        done += len(batch)
    return done / (time.perf_counter() - started)


async def measure(server: str | None, n: int, rounds: int, per_round: int, writes: int) -> dict[str, Any]:
    embedder = LocalEmbedder()
    out: dict[str, Any] = {"items": n, "store": "postgresql" if server else "sqlite"}
    out["embed_per_s"] = await anyio.to_thread.run_sync(throughput, embedder)
    async with a_store(server) as (home, store):
        out["load_s"] = await load(home, store, n, embedder.model)
        async with Runtime.open(home, store=store, workers=0, embedder="local") as rt:
            assert rt.semantic is not None
            await rt.semantic.settled()  # the start's pass over every item: nothing is pending
            started = time.perf_counter()
            await rt.memory.recall("warm up", mode="semantic")
            out["cold_ms"] = (time.perf_counter() - started) * 1000
            times: dict[str, list[float]] = {m: [] for m in (*MODES, "query embedding")}
            cpu_times: list[float] = []  # the embedding's CPU time, all threads: what the load does not change
            asked = queries(rounds * per_round)
            for r in range(rounds):
                for q in asked[r * per_round : (r + 1) * per_round]:
                    order = list(MODES) if r % 2 == 0 else list(reversed(MODES))  # neither goes first always
                    for mode in order:
                        if mode != "keyword":  # each mode embeds the query: none finds the other's vector
                            rt.semantic._queries.pop(q, None)
                        began = time.perf_counter()
                        await rt.memory.recall(q, k=K, mode=mode)
                        times[mode].append(time.perf_counter() - began)
                    began, cpu = time.perf_counter(), time.process_time()
                    await anyio.to_thread.run_sync(rt.semantic.embedder.query, q)
                    times["query embedding"].append(time.perf_counter() - began)
                    cpu_times.append(time.process_time() - cpu)  # the process is otherwise idle meanwhile
            again = []
            for q in asked:  # each asked before: its vector is kept (``QUERY_CACHE``), not made again
                began = time.perf_counter()
                await rt.memory.recall(q, k=K, mode="hybrid")
                again.append(time.perf_counter() - began)
            times["hybrid, asked again"] = again
            for name, samples in times.items():
                out[f"{name} p50"] = statistics.median(samples) * 1000
            out["query embedding cpu p50"] = statistics.median(cpu_times) * 1000
            index = next(iter(rt.semantic._indexes.values()))
            out["index_mb"] = (index.matrix.nbytes + index.scales.nbytes + index.seqs.nbytes) / 2**20
            out["rss_mb"] = rss_mb()
    out.update(await remember_p50s(server, rounds * 2 * writes))
    out["load"] = os.getloadavg()[0]
    return out


async def remember_p50s(server: str | None, writes: int) -> dict[str, float]:
    """``memory_remember``'s median with the local embedder and with none: two fresh stores (on one
    SQLite file the two writers would wait on each other's locks), taking turns write by write."""
    async with (
        a_store(server) as (home_a, store_a),
        a_store(server) as (home_b, store_b),
        Runtime.open(home_a, store=store_a, workers=0, embedder="local") as local,
        Runtime.open(home_b, store=store_b, workers=0, embedder="none") as plain,
    ):
        times: dict[str, list[float]] = {"none": [], "local": []}
        rnd = random.Random(5)
        pair = [("local", local), ("none", plain)]
        for i in range(writes):  # one write each in turn: the disk's moods fall on both alike
            for name, runtime in pair if i % 2 == 0 else pair[::-1]:
                fact = f"the user prefers {rnd.choice(['tea', 'coffee', 'water'])} at {rnd.randint(0, 23)} h"
                began = time.perf_counter()
                await runtime.memory.remember(fact)
                times[name].append(time.perf_counter() - began)
        assert local.semantic is not None
        with anyio.fail_after(120):
            await local.semantic.settled()
    return {f"remember {name} p50": statistics.median(samples) * 1e6 for name, samples in times.items()}


def verdicts(r: dict[str, Any]) -> list[tuple[str, bool]]:
    """Each target, said in a line, and whether it is met."""
    ratio = r["remember local p50"] / r["remember none p50"]
    return [
        (f"semantic recall p50 {r['semantic p50']:.1f} ms <= {TARGET_MS:.0f} ms", r["semantic p50"] <= TARGET_MS),
        (f"hybrid recall p50 {r['hybrid p50']:.1f} ms <= {TARGET_MS:.0f} ms", r["hybrid p50"] <= TARGET_MS),
        (
            f"remember p50 with an embedder / without {ratio:.2f} within 1 +/- {REMEMBER_BAND:.2f}",
            abs(ratio - 1) <= REMEMBER_BAND,
        ),
    ]


def table(r: dict[str, Any]) -> list[str]:
    """The rows ``bench.memory`` and ``bench.pg_memory`` print."""
    n = f"{r['items']:,}"
    lines = [
        f"semantic recall, {r['store']}, {n} items (load average {r['load']:.1f}; medians, top {K}, interleaved):",
        f"  {'mode':<20} {'recall p50':>11}",
    ]
    notes = {"keyword": "   (baseline)"}
    if "query embedding cpu p50" in r:
        notes["query embedding"] = f"   (CPU time {r['query embedding cpu p50']:.1f} ms, its threads together)"
    for name in (*MODES, "query embedding", "hybrid, asked again"):
        if f"{name} p50" in r:
            lines.append(f"  {name:<20} {r[f'{name} p50']:>8.1f} ms" + notes.get(name, ""))
    lines += [
        f"  memory_remember p50: {r['remember local p50']:.0f} us with the local embedder (background),"
        f" {r['remember none p50']:.0f} us with none (baseline)",
        f"  embedding throughput: {r['embed_per_s']:.0f} items/s on one core",
        f"  resident memory after the queries: {r['rss_mb']:.0f} MiB (the index {r['index_mb']:.0f} MiB);"
        f" first search of a process {r['cold_ms']:.0f} ms; loading took {r['load_s']:.0f} s",
    ]
    lines += [f"  target: {text}: {'met' if ok else 'MISSED'}" for text, ok in verdicts(r)]
    return lines


def run_child(server: str | None, n: int, rounds: int) -> dict[str, Any]:
    """Measure in a process of its own (its resident memory is then the measured one's)."""
    import subprocess

    argv = [sys.executable, "-m", "bench.memory_semantic", "--json", "--items", str(n), "--rounds", str(rounds)]
    if server:
        argv += ["--store", server]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench.memory_semantic failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--store", help="a PostgreSQL server URL without a database (default: SQLite)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--per-round", type=int, default=10, help="queries per round")
    parser.add_argument("--writes", type=int, default=60, help="remembers per runtime per round")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()
    server = args.store.rstrip("/") if args.store else None
    result = anyio.run(measure, server, args.items, args.rounds, args.per_round, args.writes)
    if args.json:
        print(json.dumps(result))
        return 0
    print("\n".join(table(result)))
    return 0 if all(ok for _, ok in verdicts(result)) else 1


if __name__ == "__main__":
    sys.exit(main())
