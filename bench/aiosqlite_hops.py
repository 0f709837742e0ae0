"""Why the SQLite store runs transactions on threads of its own rather than through aiosqlite.

Both hand work from the event loop to a thread that owns the connection, and back. aiosqlite does
it once per call (``execute``, ``commit``...), so a transaction of several statements is several
round trips, with the write lock held across the awaits in between; the store hands a whole
transaction over as one function (``runtime/store/sqlite/threads.py``): one round trip, whatever
it holds. This times, on one WAL file with ``synchronous=OFF`` (the hops, not the disk):

- read: one point ``SELECT`` (aiosqlite's one-hop ``execute_fetchall``);
- write: ``BEGIN IMMEDIATE``, four ``INSERT``s, ``COMMIT`` (the shape of a step's commit).

Needs aiosqlite, which rath-mcp does not depend on: ``.venv/bin/pip install aiosqlite``, then
``.venv/bin/python -m bench.aiosqlite_hops``. Prints the median microseconds per transaction.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from runtime.store.sqlite.threads import ConnectionThreads

try:
    import aiosqlite
except ModuleNotFoundError:
    sys.exit("bench.aiosqlite_hops needs aiosqlite, which rath-mcp does not depend on: pip install aiosqlite")

ROWS = 1000
INSERT = "INSERT INTO t (v) VALUES (?)"


def prepare(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript("PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL);")
    conn.executemany(INSERT, [(f"row {i}",) for i in range(ROWS)])
    conn.commit()
    conn.close()


def ours_read(conn: sqlite3.Connection) -> object:
    return conn.execute("SELECT v FROM t WHERE id = ?", (ROWS // 2,)).fetchone()


def ours_write(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    for _ in range(4):
        conn.execute(INSERT, ("x",))
    conn.execute("COMMIT")


async def timed(fn: Callable[[], Awaitable[object]], n: int) -> float:
    samples = []
    for _ in range(n):
        start = time.perf_counter_ns()
        await fn()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


async def main(n: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        prepare(path)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA synchronous=OFF")
        threads = ConnectionThreads("bench", [conn])
        db = await aiosqlite.connect(path, isolation_level=None)
        await db.execute("PRAGMA synchronous=OFF")

        async def their_read() -> object:
            return await db.execute_fetchall("SELECT v FROM t WHERE id = ?", (ROWS // 2,))

        async def their_write() -> None:
            await db.execute("BEGIN IMMEDIATE")
            for _ in range(4):
                await db.execute(INSERT, ("x",))
            await db.commit()

        cases = {
            "read": (lambda: threads.run(ours_read), their_read),
            "write": (lambda: threads.run(ours_write), their_write),
        }
        results: dict[str, list[tuple[float, float]]] = {case: [] for case in cases}
        for _ in range(rounds):  # interleaved, so both see the same load
            for case, (ours, theirs) in cases.items():
                results[case].append((await timed(ours, n), await timed(theirs, n)))
        await db.close()
        threads.stop()
        await threads.join()
    print(f"{'us per transaction':<20}{'ours':>8}{'aiosqlite':>11}{'ratio':>8}")
    for case, pairs in results.items():
        ours_us = statistics.median(p[0] for p in pairs)
        theirs_us = statistics.median(p[1] for p in pairs)
        print(f"{case:<20}{ours_us:>8.0f}{theirs_us:>11.0f}{theirs_us / ours_us:>7.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2000, help="transactions per sample")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.rounds))
