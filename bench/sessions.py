"""Session benchmark: our Session engine vs OpenRath 2.0.0's ``rath.session.Session``, side by side.

    .venv/bin/python bench/sessions.py                         # 10, 100, 1,000, 10,000 and 100,000 chunks
    .venv/bin/python bench/sessions.py --sizes 10,1000 --repeats 30 --no-peer
    .venv/bin/python bench/sessions.py --no-peer --store postgresql://postgres@127.0.0.1:5432

For each size N: a session of N chunks (~100 bytes each), then append, fork, merge and read on it;
each op repeated, the median reported. What each side does, on purpose:
- ours: every op is a committed SQLite transaction (synchronous=FULL: fsync per commit) that yields a
  new immutable snapshot with its own id. Append extends the session's segment in place; fork writes
  one row and copies no chunk; merge shares the first branch and copies the others' new chunks;
  read is ``rt.sessions.get`` (all N chunks); page is ``rt.sessions.window`` of 50 chunks from the
  middle (what ``session_get`` with offset/limit does); stream is a full read a page at a time
  (``rt.sessions.pages``, what export and the transcript use).
- OpenRath, in memory: ``ChunkTable.extend`` into a new ``Session`` (append), ``Session.fork``,
  ``Session.merge`` (plain concatenation, shared history twice).
- OpenRath, persisted: its way to persist a session is ``SessionWriter`` (one JSONL file per session:
  header, a line per chunk, trailer; flushed, not fsynced). A persisted fork or merge is the new
  session written out; a persisted append is one more ``write_chunk`` line on an open writer (a log
  of one mutable session, not a new snapshot); read is ``load_session`` of the N-chunk file.
Targets (exit 1 when missed), judged on ratios from the same run: a merge of two forks of the
100,000-chunk session within 2x of one of the 10-chunk session (it costs what the branches add);
a page at 100,000 chunks within 1.5x of a page at 100 (it costs the page: the same rows, one index
seek; 1.5x is the margin this shared 2-core machine's noise needs for medians of sub-millisecond
reads, a real regression, a read of the history or a thread hop, shows as 3x or more). A run
whose sizes lack the ones a target names prints it as not judged. ``--store postgresql://HOST``
runs ours on a throwaway PostgreSQL database instead of a SQLite file.
Bytes: ours is the growth of the database (page_count * page_size, WAL included) per op; OpenRath's
is the size of the file the op writes. Ratios are OpenRath / ours (above 1: we are faster/smaller).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._peer import run_peer  # noqa: E402
from runtime import Runtime  # noqa: E402
from runtime.store.sqlite.backend import SQLiteBackend, sqlite_database  # noqa: E402

FILL = "x" * 96
OPS = ("append", "fork", "merge", "read", "page", "stream")
PAGE = 50
MERGE_BOUND, PAGE_BOUND = 2.0, 1.5

PEER = r"""
import json, os, shutil, statistics, sys, tempfile, time
from pathlib import Path
sizes, repeats = json.loads(sys.argv[1]), int(sys.argv[2])
work = Path(tempfile.mkdtemp(prefix="openrath-bench-"))
os.environ["OPENRATH_HOME"] = str(work / "home")
from rath.session.chunk import ChunkKind, ChunkRow, ChunkTable
from rath.session.persistence.loader import load_session
from rath.session.persistence.writer import SessionWriter
from rath.session.session import Session
FILL = "x" * 96

def row(i):
    return ChunkRow(kind=ChunkKind.USER, payload={"content": f"{i} {FILL}"})

def persist(s):
    path = work / f"{s.id}.jsonl"
    with SessionWriter(s, path=path) as w:
        for i, r in enumerate(s.chunk_table.rows):
            w.write_chunk(i, r)
    return path

def medians(ops, count):
    out = {}
    for n, op in ops.items():
        samples = []
        for _ in range(count):
            t0 = time.perf_counter(); op(); samples.append(time.perf_counter() - t0)
        out[n] = statistics.median(samples)
    return out

slow = max(5, min(repeats, 15))
base = {n: Session(ChunkTable(tuple(row(i) for i in range(n)))) for n in sizes}
out = {n: {} for n in sizes}
tips = dict(base)
def append_mem(n):
    def op():
        tips[n] = Session(tips[n].chunk_table.extend(row(-1)), parent_session_ids=(tips[n].id,))
    return op
writers, counts = {}, {}
for n in sizes:
    writers[n] = SessionWriter(base[n], path=work / f"log-{n}.jsonl")
    for i, r in enumerate(base[n].chunk_table.rows):
        writers[n].write_chunk(i, r)
    counts[n] = n
def append_disk(n):
    def op():
        writers[n].write_chunk(counts[n], row(-1)); counts[n] += 1
    return op
paths = {n: [] for n in sizes}
def fork_disk(n):
    return lambda: paths[n].append(persist(base[n].fork()))
def branches(n):
    a, b = base[n].fork(), base[n].fork()
    return Session(a.chunk_table.extend(row(-2))), Session(b.chunk_table.extend(row(-3)))
pairs = {n: [branches(n) for _ in range(repeats + slow)] for n in sizes}
merged = {n: [] for n in sizes}
def merge_mem(n):
    return lambda: merged[n].append(pairs[n][0][0].merge(pairs[n][0][1]))
def merge_disk(n):
    def op():
        a, b = pairs[n].pop(); m = a.merge(b); paths[n].append(persist(m)); merged[n].append(m)
    return op
base_paths = {n: persist(base[n]) for n in sizes}
def read_disk(n):
    return lambda: load_session(base[n].id, path=base_paths[n])
for name, make, count in (
    ("append_mem", append_mem, repeats), ("append_disk", append_disk, repeats),
    ("fork_mem", lambda n: base[n].fork, repeats), ("fork_disk", fork_disk, slow),
    ("merge_mem", merge_mem, repeats), ("merge_disk", merge_disk, slow), ("read_disk", read_disk, slow),
):
    if name == "append_disk":
        sizes0 = {n: (work / f"log-{n}.jsonl.__partial__").stat().st_size for n in sizes}
    if name == "merge_disk":
        paths = {n: [] for n in sizes}
    times = medians({n: make(n) for n in sizes}, count)
    for n in sizes:
        out[n][name] = times[n]
        if name == "append_disk":
            out[n]["append_bytes"] = ((work / f"log-{n}.jsonl.__partial__").stat().st_size - sizes0[n]) / count
        if name == "fork_disk":
            out[n]["fork_bytes"] = statistics.median(p.stat().st_size for p in paths[n])
        if name == "merge_disk":
            out[n]["merge_bytes"] = statistics.median(p.stat().st_size for p in paths[n])
            out[n]["merge_rows"] = len(merged[n][-1].chunk_table.rows)
for n in sizes:
    writers[n].close()
shutil.rmtree(work, ignore_errors=True)
print(json.dumps(out))
"""


async def _db_bytes(rt: Runtime) -> int:
    if not isinstance(rt.store, SQLiteBackend):
        return 0  # bytes are measured on the SQLite file only

    def read(conn: Any) -> int:
        return int(conn.execute("PRAGMA page_count").fetchone()[0]) * int(
            conn.execute("PRAGMA page_size").fetchone()[0]
        )

    return await sqlite_database(rt.store).read(read)


Op = Callable[[], Awaitable[object]]


async def _medians(ops: dict[int, Op], repeats: int, *, interleave: bool = False) -> dict[int, float]:
    """Median seconds of each size's op, after one untimed run.

    Full reads run each size's repeats back to back, not in turn with the others: a result freed late
    (a worker thread drops its last reference to a 10,000-chunk read only on its next job) would
    otherwise charge one size's cost to the next size's op. Small ops (``interleave``) take their
    samples in turn across the sizes, so that a ratio between two sizes compares samples taken under
    the same load on a shared machine, not one size in a quiet minute and the other in a busy one.
    """
    for op in ops.values():
        await op()
    samples: dict[int, list[float]] = {n: [] for n in ops}
    rounds = [list(ops.items())] * repeats if interleave else [[(n, op)] * repeats for n, op in ops.items()]
    for batch in rounds:
        for n, op in batch:
            t0 = time.perf_counter()
            await op()
            samples[n].append(time.perf_counter() - t0)
    return {n: statistics.median(xs) for n, xs in samples.items()}


async def _bytes_per_op(rt: Runtime, op: Op, count: int) -> float:
    start = await _db_bytes(rt)
    for _ in range(count):
        await op()
    return (await _db_bytes(rt) - start) / count


async def measure_ours(
    sizes: list[int], repeats: int, bytes_ops: int, sync: str, server: str | None
) -> dict[int, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="rath-bench-") as home:
        if server is None:
            async with Runtime.open(home, workers=0, synchronous=sync) as rt:  # no worker loop polling while we time
                return await _measure(rt, sizes, repeats, bytes_ops)
        async with _throwaway_postgres(server) as url, Runtime.open(home, store=url, workers=0) as rt:
            return await _measure(rt, sizes, repeats, bytes_ops)


@asynccontextmanager
async def _throwaway_postgres(server: str) -> AsyncIterator[str]:
    """A fresh database on ``server``, migrated, dropped afterwards."""
    import asyncpg

    from runtime.store.postgres import migrations, schema

    name = f"rath_bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(server.rstrip("/") + "/postgres")
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = server.rstrip("/") + "/" + name
        await migrations.apply(url, schema.ALL)
        yield url
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _measure(rt: Runtime, sizes: list[int], repeats: int, bytes_ops: int) -> dict[int, dict[str, float]]:
    s = rt.sessions
    base = {n: (await s.create([{"kind": "user", "content": f"{i} {FILL}"} for i in range(n)])).id for n in sizes}
    out: dict[int, dict[str, float]] = {n: {} for n in sizes}
    tips = dict(base)

    def append(n: int) -> Op:
        async def op() -> None:
            tips[n] = (await s.append(tips[n], [{"kind": "user", "content": f"-1 {FILL}"}])).id

        return op

    def fork(n: int) -> Op:
        return lambda: s.fork(base[n])

    pairs: dict[int, list[list[str]]] = {n: [] for n in sizes}
    for n in sizes:
        for _ in range(repeats + bytes_ops + 1):
            a, b = await s.fork(base[n], count=2)
            a2 = await s.append(a.id, [{"kind": "assistant", "content": "a"}])
            pairs[n].append([a2.id, (await s.append(b.id, [{"kind": "assistant", "content": "b"}])).id])
    merged: dict[int, int] = {}

    def merge(n: int) -> Op:
        async def op() -> None:
            merged[n] = (await s.merge(pairs[n].pop())).length

        return op

    def read(n: int) -> Op:
        return lambda: s.get(base[n])

    def page(n: int) -> Op:
        return lambda: s.window(base[n], max(0, n // 2 - PAGE // 2), PAGE)

    def stream(n: int) -> Op:
        async def op() -> None:
            async for _ in s.pages(base[n]):
                pass

        return op

    whole = min(repeats, 15)  # a full read of the longest session takes most of a second
    plan = (("append", append, repeats), ("fork", fork, repeats), ("merge", merge, repeats))
    plan += (("read", read, whole), ("page", page, repeats), ("stream", stream, whole))
    for name, make, count in plan:
        times = await _medians({n: make(n) for n in sizes}, count, interleave=name not in ("read", "stream"))
        for n in sizes:
            out[n][name] = times[n]
            if name in ("append", "fork", "merge"):
                out[n][f"{name}_bytes"] = await _bytes_per_op(rt, make(n), bytes_ops)
    for n in sizes:
        out[n]["merge_rows"] = merged[n]
    return out


def targets(sizes: list[int], ours: dict[int, dict[str, float]]) -> list[tuple[str, float | None, float]]:
    """``(what, ratio or None when not judged, bound)`` for each target."""
    merge = ours[100_000]["merge"] / ours[10]["merge"] if {10, 100_000} <= set(sizes) else None
    page = ours[100_000]["page"] / ours[100]["page"] if {100, 100_000} <= set(sizes) else None
    return [
        ("merge of two forks, 100,000 vs 10 chunks", merge, MERGE_BOUND),
        (f"page of {PAGE} chunks, 100,000 vs 100 chunks", page, PAGE_BOUND),
    ]


def _us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:,.0f}"


def _ratio(theirs: float | None, ours: float | None) -> str:
    return "-" if not theirs or not ours else f"{theirs / ours:,.1f}x"


def report(sizes: list[int], ours: dict[int, dict[str, float]], peer: dict[int, dict[str, float]] | None) -> str:
    head = (
        f"{'op':<7}{'chunks':>8} | {'rath-mcp us':>12}{'bytes':>9} | {'OpenRath mem us':>16}"
        f"{'disk us':>10}{'bytes':>11} | {'disk/ours':>10}"
    )
    lines = [head, "-" * len(head)]
    for op in OPS:
        for n in sizes:
            o, p = ours[n], (peer or {}).get(n, {})
            if op in ("page", "stream"):
                lines.append(f"{op:<7}{n:>8,} | {_us(o[op]):>12}{'-':>9} | {'-':>16}{'-':>10}{'-':>11} | {'-':>10}")
                continue
            mem = p.get(f"{op}_mem")
            disk = p.get(f"{op}_disk")
            o_bytes = o.get(f"{op}_bytes")
            p_bytes = p.get(f"{op}_bytes")
            lines.append(
                f"{op:<7}{n:>8,} | {_us(o[op]):>12}{'-' if o_bytes is None else f'{o_bytes:,.0f}':>9} | "
                f"{_us(mem):>16}{_us(disk):>10}{'-' if p_bytes is None else f'{p_bytes:,.0f}':>11} | "
                f"{_ratio(disk, o[op]):>10}"
            )
    lo, hi = min(sizes), max(sizes)
    lines += [
        "",
        f"ours, {hi:,} vs {lo:,} chunks: fork time x{ours[hi]['fork'] / ours[lo]['fork']:.2f}, "
        f"fork bytes {ours[hi]['fork_bytes']:,.0f} vs {ours[lo]['fork_bytes']:,.0f}, "
        f"append time x{ours[hi]['append'] / ours[lo]['append']:.2f}",
        f"merged rows at {hi:,}: ours {ours[hi]['merge_rows']:,.0f}"
        + (f", OpenRath {peer[hi]['merge_rows']:,.0f} (shared history twice)" if peer else ""),
    ]
    if peer:
        lines.append(
            f"OpenRath, {hi:,} vs {lo:,} chunks: in-memory append"
            f" x{peer[hi]['append_mem'] / peer[lo]['append_mem']:.1f}"
            f"; persisted fork x{peer[hi]['fork_disk'] / peer[lo]['fork_disk']:.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,10000,100000", help="session lengths, comma-separated")
    parser.add_argument("--repeats", type=int, default=50, help="repeats per op (medians reported)")
    parser.add_argument("--bytes-ops", type=int, default=100, help="ops per bytes measurement (a 4 KiB page / N)")
    parser.add_argument(
        "--synchronous",
        default="FULL",
        choices=["FULL", "NORMAL", "OFF"],
        help="our SQLite durability: FULL fsyncs every commit (default); NORMAL (WAL) survives a process crash"
        " but not a power cut, like OpenRath's flushed-not-fsynced file",
    )
    parser.add_argument("--store", default=None, help="a PostgreSQL server URL (no database): ours on PostgreSQL")
    parser.add_argument("--no-peer", action="store_true", help="measure rath-mcp only (no OpenRath venv)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    ours = anyio.run(measure_ours, sizes, args.repeats, args.bytes_ops, args.synchronous, args.store)
    peer = None
    if not args.no_peer:
        raw = json.loads(run_peer(PEER, json.dumps(sizes), str(args.repeats)))
        peer = {int(k): v for k, v in raw.items()}
    where = "PostgreSQL" if args.store else f"SQLite synchronous={args.synchronous}"
    print(f"rath-mcp: {where}; medians of {args.repeats} repeats")
    print(report(sizes, ours, peer))
    missed = False
    for what, ratio, bound in targets(sizes, ours):
        if ratio is None:
            print(f"target {what}: not judged (this run lacks those sizes)")
            continue
        verdict = "ok" if ratio <= bound else "MISSED"
        missed |= ratio > bound
        print(f"target {what}: x{ratio:.2f} (bound x{bound:.1f}) {verdict}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
