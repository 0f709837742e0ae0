"""Scale-out on PostgreSQL: durable steps/s with 1, 2 and 4 worker processes, and a step's cost beside pgbench.

    .venv/bin/python bench/scale.py
    .venv/bin/python bench/scale.py --server postgresql://postgres@127.0.0.1:5432 --slots 4 --steps 20

It makes a database of its own on the server (and drops it at the end), migrates it, and measures:

- **scale-out**: ``rath-mcp worker --workers SLOTS`` processes (1, 2, then 4) drive
  ``processes × SLOTS`` runs of ``wait_steps`` (bench/scale_flows.py), each ``--steps`` steps that
  wait 0.1 s (a model call's stand-in) and commit. steps/s is committed steps over the wall time
  from the first run queued to the last one finished. Target: efficiency at 4 workers,
  steps/s(4) / (4 × steps/s(1)), at least 0.85.
- **a step's cost**: one run of ``noop_steps`` driven by one worker (in this process): no-op steps,
  each one durable commit, one after another, beside ``pgbench`` with one client and its default
  TPC-B-like script (``pgbench -i`` in a scratch database of the same server), in the same run.
  Target: at least 0.5 of pgbench's transactions/s.

It prints a table and exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
import asyncpg  # noqa: E402

from runtime import Runtime  # noqa: E402
from runtime.store import parse_store_url  # noqa: E402
from runtime.store.postgres import backend as postgres  # noqa: E402

FLOWS = "bench.scale_flows"
SCALE_TARGET = 0.85
PGBENCH_TARGET = 0.5
PROCESSES = (1, 2, 4)


def database_url(server: str, database: str) -> str:
    parts = urlsplit(server)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, "", ""))


async def admin(server: str, sql: str) -> None:
    conn = await asyncpg.connect(database_url(server, "postgres"), timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@asynccontextmanager
async def scratch_database(server: str, name: str) -> AsyncIterator[str]:
    """A database of this run's own on ``server``, dropped afterwards; yields its URL."""
    await admin(server, f'CREATE DATABASE "{name}"')
    try:
        yield database_url(server, name)
    finally:
        with anyio.CancelScope(shield=True):
            await admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def listeners(url: str) -> int:
    """How many rath-mcp processes listen for notifications on this database (a process is up once it does)."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1"
        return int(await conn.fetchval(sql, "rath-mcp-listener"))
    finally:
        await conn.close()


@asynccontextmanager
async def worker_processes(url: str, count: int, slots: int, home: Path) -> AsyncIterator[None]:
    """``count`` ``rath-mcp worker`` processes on ``url``, each up (listening) before this yields."""
    base = await listeners(url)
    processes = []
    try:
        for i in range(count):
            command = [sys.executable, "-m", "rath_mcp", "worker", "--store", url, "--workers", str(slots)]
            command += ["--home", str(home / f"w{i}"), "--workflows", FLOWS]
            processes.append(await anyio.open_process(command, cwd=ROOT, stdout=subprocess.DEVNULL))
        with anyio.fail_after(60):
            while await listeners(url) < base + count:
                for p in processes:
                    if p.returncode is not None:
                        raise SystemExit(f"a worker exited with {p.returncode}")
                await anyio.sleep(0.1)  # another process: polling is all there is
        yield
    finally:
        with anyio.CancelScope(shield=True):
            for p in processes:
                p.terminate()
            for p in processes:
                with anyio.move_on_after(15):
                    await p.wait()
                if p.returncode is None:
                    p.kill()
                    await p.wait()


async def drive(rt: Runtime, url: str, workflow: str, runs: int, steps: int) -> float:
    """Queue ``runs`` runs of ``workflow``, wait for all; committed steps per second, from the first run's
    creation to the last one's end (the store's own timestamps, so this process's waiting costs nothing)."""
    ids = [(await rt.runs.start(workflow, input={"steps": steps})).id for _ in range(runs)]
    conn = await asyncpg.connect(url, timeout=10)
    try:
        with anyio.fail_after(600):
            while True:  # one cheap query every 50 ms: waiting on each run would load the machine it measures
                row = await conn.fetchrow(
                    "SELECT count(*) FILTER (WHERE status NOT IN ('succeeded', 'failed', 'cancelled', 'timed_out')) "
                    "AS left, count(*) FILTER (WHERE status <> 'succeeded') AS bad, min(created_at) AS t0, "
                    "max(updated_at) AS t1 FROM runs WHERE id = ANY($1::text[])",
                    ids,
                )
                if row["left"] == 0:
                    break
                await anyio.sleep(0.05)
    finally:
        await conn.close()
    if row["bad"]:
        raise SystemExit(f"{row['bad']} run(s) of {workflow} did not succeed")
    return runs * (steps + 1) / (row["t1"] - row["t0"])  # each run: ``steps`` steps and its last one


async def scale_out(url: str, slots: int, steps: int, home: Path) -> dict[int, float]:
    rates: dict[int, float] = {}
    async with Runtime.open(home / "client", store=url, workers=0) as rt:
        rt.workflows.load(FLOWS)
        for count in PROCESSES:
            async with worker_processes(url, count, slots, home / f"x{count}"):
                await drive(rt, url, "wait_steps", count, 2)  # warm up: every process imports and connects
                rates[count] = await drive(rt, url, "wait_steps", count * slots, steps)
    return rates


async def noop_steps(url: str, steps: int, home: Path) -> float:
    async with Runtime.open(home / "noop", store=url, workers=1) as rt:
        rt.workflows.load(FLOWS)
        await drive(rt, url, "noop_steps", 1, 20)  # warm up the pool and the plan
        return await drive(rt, url, "noop_steps", 1, steps)


def pgbench_binary() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pgbench")) or [shutil.which("pgbench") or ""]
    if not found[-1]:
        raise SystemExit("pgbench is not installed (apt-get install postgresql-contrib or postgresql)")
    return found[-1]


async def pgbench_tps(server: str, seconds: int) -> float:
    """pgbench's transactions/s: one client, its default script, in a scratch database of ``server``."""
    async with scratch_database(server, f"rath_pgbench_{uuid.uuid4().hex[:10]}") as url:
        binary = pgbench_binary()
        await anyio.run_process([binary, "-i", "-q", url], check=True)
        done = await anyio.run_process([binary, "-c", "1", "-T", str(seconds), url], check=True)
    found = re.search(rb"tps = ([0-9.]+)", done.stdout)
    if found is None:
        raise SystemExit(f"pgbench printed no tps:\n{done.stdout.decode()}")
    return float(found.group(1))


async def main(args: argparse.Namespace) -> int:
    home = Path(tempfile.mkdtemp(prefix="rath-scale-"))
    try:
        async with scratch_database(args.server, f"rath_scale_{uuid.uuid4().hex[:10]}") as url:
            await postgres.migrate(parse_store_url(url))
            rates = await scale_out(url, args.slots, args.steps, home)
            noop = await noop_steps(url, args.noop_steps, home)
        tps = await pgbench_tps(args.server, args.pgbench_s)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return report(rates, noop, tps, args)


def report(rates: dict[int, float], noop: float, tps: float, args: argparse.Namespace) -> int:
    efficiency = rates[4] / (4 * rates[1])
    ratio = noop / tps
    print(f"PostgreSQL at {urlsplit(args.server).netloc}; {args.slots} slots per worker, {args.steps} steps per run")
    print(f"{'measure':<52} {'value':>10}  target")
    for count in PROCESSES:
        print(f"{f'0.1 s steps/s, {count} worker process(es)':<52} {rates[count]:>10.1f}")
    print(f"{'scale-out efficiency at 4 = sps(4) / (4 * sps(1))':<52} {efficiency:>10.3f}  >= {SCALE_TARGET}")
    print(f"{'no-op durable steps/s (one run, one after another)':<52} {noop:>10.1f}")
    print(f"{'pgbench tps (1 client, TPC-B-like)':<52} {tps:>10.1f}")
    print(f"{'no-op steps/s / pgbench tps':<52} {ratio:>10.3f}  >= {PGBENCH_TARGET}")
    checks = {"scale-out": efficiency >= SCALE_TARGET, "no-op vs pgbench": ratio >= PGBENCH_TARGET}
    missed = [name for name, ok in checks.items() if not ok]
    if missed:
        print(f"MISSED: {', '.join(missed)}")
        return 1
    print("all targets met")
    return 0


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default=os.environ.get("RATH_BENCH_PG", "postgresql://postgres@127.0.0.1:5432"))
    parser.add_argument("--slots", type=int, default=4, help="runs each worker process drives at once")
    parser.add_argument("--steps", type=int, default=20, help="0.1 s steps per run")
    parser.add_argument("--noop-steps", type=int, default=2000, help="no-op steps of the one no-op run")
    parser.add_argument("--pgbench-s", type=int, default=10, help="seconds pgbench runs")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(anyio.run(main, parse(sys.argv[1:])))
