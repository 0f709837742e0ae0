"""Durable step throughput: ours vs OpenRath 2.0.0 vs a bare sqlite3 loop (one command).

    .venv/bin/python bench/durable.py [--runs 400] [--rounds 5] [--concurrency 1,4,64] [--no-peer]

A 10-step no-op workflow, ``--runs`` runs, ``synchronous=FULL`` everywhere; reports committed
steps per second. Runs are submitted first and not timed (as in the OpenRath peer script); the
timer covers claiming and executing every step. The bare loop does the same commits per step
(run row update, three events, a checkpoint) one transaction at a time, with no asyncio and no
runtime: the physical limit of one writer on this disk.

The disk is shared and its fsync drifts by a third within a minute, so the two are interleaved:
each of ``--rounds`` rounds measures the bare loop, then ours, at every concurrency, and each of
ours is judged against the mean of the bare loops just before and just after it. The table gives
medians over the rounds (steps/s, and the ratio to the bare loop).

Targets (exit 1 when one is missed): with 1, 4 and 64 runs driven at once, a median of at least 50%
of the bare loop's steps/s (one run alone is the common case: an agent's run); at the highest
concurrency, at least 3x OpenRath 2.0.0 (when the peer runs).

The steps are declared ``read_only``, so a run's steps share commits (``runtime/durable/held.py``).
One run of the same steps declared ``idempotent``, which commit one at a time as a step with effects
does, is measured too and printed beside them (a figure, not a target).
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._peer import PEERS, run_peer
from runtime import EffectClass, Runtime, StepContext, Workflow, step
from runtime.store.sqlite.backend import sqlite_database

STEPS = 10


class TenSteps(Workflow):
    """Ten no-op steps in a line."""


class TenIdempotentSteps(Workflow):
    """The same steps declared ``idempotent``: each one's commit is made before the next step starts."""


def _noop(i: int, effects: EffectClass) -> Any:
    async def noop(self: Workflow, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "i": i}

    noop.__name__ = f"s{i}"
    successors = [f"s{i + 1}"] if i + 1 < STEPS else []
    return step(entry=i == 0, successors=successors, effects=effects)(noop)


for _i in range(STEPS):
    setattr(TenSteps, f"s{_i}", _noop(_i, EffectClass.READ_ONLY))
    setattr(TenIdempotentSteps, f"s{_i}", _noop(_i, EffectClass.IDEMPOTENT))


async def ours(runs: int, workers: int, workflow: type[Workflow] = TenSteps) -> float:
    """Committed steps per second of our runtime (SQLite store, synchronous=FULL)."""
    with tempfile.TemporaryDirectory() as home:
        async with Runtime.open(home, workers=0) as rt:
            rt.workflows.register(workflow)
            async with anyio.create_task_group() as tg:
                for _ in range(runs):
                    tg.start_soon(lambda: rt.runs.start(workflow.name))
        async with Runtime.open(home, workers=workers, synchronous="FULL") as rt:
            rt.workflows.register(workflow)
            start = time.perf_counter()
            while True:
                done = await sqlite_database(rt.store).read(_count_succeeded)
                if done == runs:
                    break
                await anyio.sleep(0.01)
            elapsed = time.perf_counter() - start
    return runs * STEPS / elapsed


def _count_succeeded(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM runs WHERE status = 'succeeded'").fetchone()[0])


def bare(runs: int) -> float:
    """The same commits per step from a plain sqlite3 loop: one transaction per step, no runtime."""
    with tempfile.TemporaryDirectory() as d:
        conn = sqlite3.connect(Path(d) / "bare.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, step TEXT, state TEXT, seq INTEGER, updated REAL)")
        conn.execute("CREATE TABLE events (run INTEGER, seq INTEGER, type TEXT, data TEXT, PRIMARY KEY (run, seq))")
        conn.execute("CREATE TABLE checkpoints (run INTEGER, seq INTEGER, state TEXT, PRIMARY KEY (run, seq))")
        conn.executemany("INSERT INTO runs VALUES (?, 's0', '{}', 0, 0)", [(i,) for i in range(runs)])
        start = time.perf_counter()
        for run in range(runs):
            for i in range(STEPS):
                state = json.dumps({"i": i})
                conn.execute("BEGIN IMMEDIATE")
                (seq,) = conn.execute(
                    "UPDATE runs SET step = ?, state = ?, seq = seq + 3, updated = ? WHERE id = ? RETURNING seq",
                    (f"s{i + 1}", state, time.time(), run),
                ).fetchone()
                conn.executemany(
                    "INSERT INTO events VALUES (?, ?, ?, ?)",
                    [(run, seq - 2 + k, kind, "{}") for k, kind in enumerate(("completed", "checkpoint", "started"))],
                )
                conn.execute("INSERT INTO checkpoints VALUES (?, ?, ?)", (run, seq - 1, state))
                conn.execute("COMMIT")
        elapsed = time.perf_counter() - start
        conn.close()
    return runs * STEPS / elapsed


def openrath(runs: int) -> float:
    """OpenRath 2.0.0 (LocalRuntime + SQLiteRunStore) in its own venv, measured by the shared peer script."""
    out = run_peer((PEERS / "openrath_durable.py").read_text(), str(runs))
    match = re.search(r"steps/s (\d+(?:\.\d+)?)", out)
    if match is None:
        raise SystemExit(f"unexpected peer output: {out!r}")
    return float(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of bare loop and ours")
    parser.add_argument("--concurrency", default="1,4,64", help="runs driven at once by our runtime, comma-separated")
    parser.add_argument("--no-peer", action="store_true", help="skip OpenRath 2.0.0 (no peer venv)")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    print(f"durable steps: {args.runs} runs x {STEPS} no-op steps, synchronous=FULL, {args.rounds} rounds", flush=True)
    theirs = None if args.no_peer else openrath(args.runs)
    bares = [bare(args.runs)]
    mine: dict[int, list[float]] = {n: [] for n in levels}
    ratios: dict[int, list[float]] = {n: [] for n in levels}
    each: list[float] = []  # one run of idempotent steps: a commit a step
    each_ratios: list[float] = []
    for _ in range(args.rounds):
        for n in levels:
            ours_now = anyio.run(ours, args.runs, n)
            bares.append(bare(args.runs))
            mine[n].append(ours_now)
            ratios[n].append(ours_now / statistics.mean(bares[-2:]))
        each.append(anyio.run(ours, args.runs, 1, TenIdempotentSteps))
        bares.append(bare(args.runs))
        each_ratios.append(each[-1] / statistics.mean(bares[-2:]))
    limit = statistics.median(bares)
    print(f"{'system':<32} {'steps/s':>10} {'us/step':>9} {'vs OpenRath':>12} {'vs bare':>9}  (medians)")
    rows: list[tuple[str, float, float]] = [
        (f"rath-mcp runtime, {n} at once", statistics.median(mine[n]), statistics.median(ratios[n])) for n in levels
    ]
    rows.append(("  1 at once, idempotent steps", statistics.median(each), statistics.median(each_ratios)))
    rows += [("OpenRath 2.0.0 LocalRuntime", theirs, theirs / limit)] if theirs else []
    rows.append(("bare sqlite3 loop", limit, 1.0))
    for name, value, ratio in rows:
        versus = f"{value / theirs:>11.2f}x" if theirs else f"{'-':>12}"
        print(f"{name:<32} {value:>10.0f} {1e6 / value:>9.0f} {versus} {ratio:>8.0%}")
    for n in levels:
        print(f"  {n} at once vs bare, each round: " + ", ".join(f"{r:.0%}" for r in ratios[n]))
    print("  1 at once, idempotent steps (a commit a step; not a target), each round: "
          + ", ".join(f"{r:.0%}" for r in each_ratios))  # fmt: skip
    missed = [
        f"{n} at once: {statistics.median(ratios[n]):.0%} of the bare loop (target 50%)"
        for n in levels
        if statistics.median(ratios[n]) < 0.5
    ]
    top = max(levels)
    if theirs and statistics.median(mine[top]) < 3 * theirs:
        missed.append(f"{top} at once: {statistics.median(mine[top]) / theirs:.2f}x OpenRath (target 3x)")
    print("targets: " + ("all met" if not missed else "MISSED " + "; ".join(missed)))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
