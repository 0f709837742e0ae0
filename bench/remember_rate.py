"""``memory_remember`` throughput and bytes per item, PostgreSQL beside the SQLite store (issue 31).

    .venv/bin/python -m bench.remember_rate                       # 3 rounds of 2000 items per store
    .venv/bin/python -m bench.remember_rate --rounds 5 --items 4000

Two runtimes (no embedder, no workers), one on a fresh SQLite home and one on a fresh PostgreSQL
database, take turns (which goes first alternates) remembering rounds of ``bench.memory``'s corpus
(50-120 Zipf-distributed words per item): each round is ``--items`` ``rt.memory.remember`` calls,
``CONCURRENT`` at once (as many callers would: the stores group-commit them), each durable and
searchable once it returns. Items/s is a round's items over its wall time; the medians are printed.
Bytes per item is what the store grew by over all the items: on PostgreSQL the memory tables with
their indexes and TOAST (``pg_total_relation_size``), on SQLite the file (checkpointed).
``bench.pg_memory`` runs it first. Targets (PostgreSQL): >= 3,000 items/s, <= 3 KB per item.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.memory import corpus  # noqa: E402
from bench.memory_semantic import a_store  # noqa: E402
from runtime import Runtime  # noqa: E402

TARGET_RATE = 3000.0
TARGET_BYTES = 3 * 1024
CONCURRENT = 1000
#: What PostgreSQL's memory layer is stored in (a table missing from a schema counts nothing).
PG_SIZE = (
    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.relkind = 'r' AND n.nspname = current_schema() AND c.relname LIKE 'memory\\_%'"
)


async def _remember(rt: Runtime, docs: list[str], first: int) -> float:
    """Remember ``docs`` (``CONCURRENT`` at once); returns the seconds it took."""

    async def one(doc: str, i: int) -> None:
        await rt.memory.remember(doc, path=f"d{i}")

    began = time.perf_counter()
    for at in range(0, len(docs), CONCURRENT):
        async with anyio.create_task_group() as tg:
            for i, doc in enumerate(docs[at : at + CONCURRENT], first + at):
                tg.start_soon(one, doc, i)
    return time.perf_counter() - began


async def _pg_bytes(url: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval(PG_SIZE))
    finally:
        await conn.close()


def _sqlite_bytes(home: Path) -> int:
    import sqlite3

    path = home / "rath.db"
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return path.stat().st_size


async def measure(server: str, items: int, rounds: int) -> dict[str, Any]:
    docs = corpus(items * rounds)
    rates: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
    async with a_store(None) as (lite_home, _), a_store(server) as (pg_home, pg_url):
        assert pg_url is not None
        async with (
            Runtime.open(lite_home, workers=0, embedder="none") as lite,
            Runtime.open(pg_home, store=pg_url, workers=0, embedder="none") as pg,
        ):
            await lite.memory.remember("warm up", path="warm")  # the space made, statements prepared
            await pg.memory.remember("warm up", path="warm")
            before = {"sqlite": _sqlite_bytes(lite_home), "postgresql": await _pg_bytes(pg_url)}
            pair = [("sqlite", lite), ("postgresql", pg)]
            for r in range(rounds):
                part = docs[r * items : (r + 1) * items]
                for name, rt in pair if r % 2 == 0 else pair[::-1]:
                    rates[name].append(len(part) / await _remember(rt, part, r * items))
            after = {"sqlite": _sqlite_bytes(lite_home), "postgresql": await _pg_bytes(pg_url)}
    n = items * rounds
    out: dict[str, Any] = {"items": n, "round": items, "rounds": rounds, "load": os.getloadavg()[0]}
    for name, got in rates.items():
        out[name] = {"rate": statistics.median(got), "rates": got, "bytes": (after[name] - before[name]) / n}
    return out


def verdicts(r: dict[str, Any]) -> list[tuple[str, bool]]:
    pg = r["postgresql"]
    kb = pg["bytes"] / 1024
    return [
        (f"PostgreSQL remember {pg['rate']:,.0f} items/s >= {TARGET_RATE:,.0f}", pg["rate"] >= TARGET_RATE),
        (f"PostgreSQL {kb:.2f} KB per item <= {TARGET_BYTES / 1024:.0f} KB", pg["bytes"] <= TARGET_BYTES),
    ]


def table(r: dict[str, Any]) -> list[str]:
    lines = [
        f"memory_remember, {r['rounds']} rounds of {r['round']:,} items per store, {CONCURRENT} at once"
        f" (load average {r['load']:.1f}; medians, stores taking turns):",
        f"  {'store':<11} {'items/s':>9} {'KB per item':>12}   rounds (items/s)",
    ]
    for name in ("sqlite", "postgresql"):
        m = r[name]
        rounds = ", ".join(f"{x:,.0f}" for x in m["rates"])
        lines.append(f"  {name:<11} {m['rate']:>9,.0f} {m['bytes'] / 1024:>12.2f}   {rounds}")
    ratio = r["postgresql"]["rate"] / r["sqlite"]["rate"]
    lines.append(f"  PostgreSQL / SQLite: {ratio:.2f}x items/s")
    lines += [f"  target: {text}: {'met' if ok else 'MISSED'}" for text, ok in verdicts(r)]
    return lines


def run_child(server: str, items: int, rounds: int) -> dict[str, Any]:
    """Measure in a process of its own."""
    import subprocess

    argv = [sys.executable, "-m", "bench.remember_rate", "--json", "--items", str(items), "--rounds", str(rounds)]
    done = subprocess.run([*argv, "--server", server], cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1) or not done.stdout.strip():  # 1: a target missed, said in the figures
        raise SystemExit(f"bench.remember_rate failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2000, help="items per round per store")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432", help="server URL, no database")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()
    r = anyio.run(measure, args.server.rstrip("/"), args.items, args.rounds)
    if args.json:
        print(json.dumps(r))
    else:
        print("\n".join(table(r)))
    return 0 if all(ok for _, ok in verdicts(r)) else 1


if __name__ == "__main__":
    sys.exit(main())
