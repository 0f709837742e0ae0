"""Scale-out on PostgreSQL: durable steps/s with 1, 2 and 4 worker processes, and a step's cost beside pgbench.

    .venv/bin/python -m bench.scale
    .venv/bin/python -m bench.scale --server postgresql://postgres@127.0.0.1:5432 --slots 4 --steps 20

It makes a database of its own on the server (and drops it at the end), migrates it, and measures:

- **scale-out**: ``rath-mcp worker --workers SLOTS`` processes (1, 2, then 4) drive
  ``processes × SLOTS`` runs of ``wait_steps`` (bench/scale_flows.py), each ``--steps`` steps that
  wait 0.1 s (a model call's stand-in) and commit. steps/s is committed steps over the wall time
  from the first run queued to the last one finished. Target: efficiency at 4 workers,
  steps/s(4) / (4 × steps/s(1)), at least 0.85.
- **a step's cost**: ``noop_steps`` runs (no-op steps, each one durable commit) driven by a runtime
  in this process, 64 runs at once (64 worker slots) and one run alone, beside ``pgbench`` running
  what one step must at least do, a custom script of one UPDATE and one INSERT per transaction
  (``STEP_SCRIPT``, on ``pgbench -i``'s tables in a scratch database of the same server), with 8
  clients and with 1. ``--rounds`` rounds take the four in turn (the order flips each round, so a
  burst of other load on the shared machine lands on both sides); medians are compared. Targets
  (issue 31): 64 runs at least 1.0x pgbench's 8 clients; one run at least 0.6x its 1 client.
  pgbench's default TPC-B-like script (five statements a transaction), 1 client, is a second line
  (no target: a step is not five statements, and beside it we looked better than we are).

It prints a table and exits 1 when a target is missed.

``--hosts N`` measures instead workers on N hosts (network namespaces, as root), reaching the store
through a proxy that delays each chunk 0, 1 or 5 ms each way: ``bench/scale_hosts.py`` says what.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import signal
import statistics
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
from anyio.abc import Process  # noqa: E402

from runtime import Runtime  # noqa: E402
from runtime.store import parse_store_url  # noqa: E402
from runtime.store.postgres import backend as postgres  # noqa: E402

FLOWS = "bench.scale_flows"
SCALE_TARGET = 0.85
MANY_TARGET = 1.0  # 64 runs / pgbench's step script, 8 clients
ONE_TARGET = 0.6  # one run / pgbench's step script, 1 client
MANY_RUNS = 64
PGBENCH_CLIENTS = 8
PROCESSES = (1, 2, 4)
#: What one durable step must at least do: change the run's row and append one row, in one transaction.
STEP_SCRIPT = """\\set aid random(1, 100000 * :scale)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 1, :aid, 1, CURRENT_TIMESTAMP);
END;
"""


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


def worker_command(url: str, slots: int, home: Path) -> list[str]:
    """The command of one ``rath-mcp worker`` of ``slots`` slots on ``url`` serving the bench's workflows."""
    command = [sys.executable, "-m", "rath_mcp", "worker", "--store", url, "--workers", str(slots)]
    return [*command, "--home", str(home), "--workflows", FLOWS]


@asynccontextmanager
async def worker_processes(
    url: str, commands: list[list[str]], stop: signal.Signals = signal.SIGTERM
) -> AsyncIterator[None]:
    """The worker ``commands`` (``worker_command``s, maybe wrapped to run elsewhere) as processes, each up
    (listening on ``url``'s database) before this yields; stopped with ``stop`` when the block ends, and
    their connections gone before it returns (the next measurement counts its own workers' listeners)."""
    base = await listeners(url)
    processes: list[Process] = []
    with tempfile.TemporaryFile() as log:  # their stderr (a pipe nobody reads would fill and stop them)
        try:
            for command in commands:
                processes.append(await anyio.open_process(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log))
            with anyio.fail_after(60):
                while await listeners(url) < base + len(commands):
                    for p in processes:
                        if p.returncode is not None:
                            log.seek(0)
                            said = log.read().decode(errors="replace")[-3000:]
                            raise SystemExit(f"a worker exited with {p.returncode}:\n{said}")
                    await anyio.sleep(0.1)  # another process: polling is all there is
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(processes, stop)
                with anyio.move_on_after(15):
                    while await listeners(url) > base:  # noqa: ASYNC110 (another process: polling is all there is)
                        await anyio.sleep(0.1)


async def _stop(processes: list[Process], stop: signal.Signals) -> None:
    for p in processes:
        if p.returncode is None:
            p.send_signal(stop)
    for p in processes:
        with anyio.move_on_after(15):
            await p.wait()
        if p.returncode is None:
            p.kill()
            await p.wait()


async def drive(rt: Runtime, url: str, workflow: str, runs: int, steps: int) -> float:
    """Queue ``runs`` runs of ``workflow``, wait for all; committed steps per second, from the first run's
    creation to the last one's end (the store's own timestamps, so this process's waiting costs nothing)."""
    ids: list[str] = []

    async def start() -> None:
        ids.append((await rt.runs.start(workflow, input={"steps": steps})).id)

    async with anyio.create_task_group() as tg:  # all at once (their commits grouped): one by one, the
        for _ in range(runs):  # last would be queued a few ms per run after the first, counted as wall time
            tg.start_soon(start)
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
    return runs * (steps + 1) / float(row["t1"] - row["t0"])  # each run: ``steps`` steps and its last one


async def scale_out(url: str, slots: int, steps: int, home: Path) -> dict[int, float]:
    rates: dict[int, float] = {}
    async with Runtime.open(home / "client", store=url, workers=0) as rt:
        rt.workflows.load(FLOWS)
        for count in PROCESSES:
            commands = [worker_command(url, slots, home / f"x{count}" / f"w{i}") for i in range(count)]
            async with worker_processes(url, commands):
                await drive(rt, url, "wait_steps", count, 2)  # warm up: every process imports and connects
                rates[count] = await drive(rt, url, "wait_steps", count * slots, steps)
    return rates


async def noop_steps(url: str, runs: int, steps: int, home: Path) -> float:
    """Committed no-op steps/s of ``runs`` runs driven at once by one runtime of ``runs`` slots."""
    async with Runtime.open(home / f"noop{runs}", store=url, workers=runs) as rt:
        rt.workflows.load(FLOWS)
        await drive(rt, url, "noop_steps", runs, 5)  # warm up the pool and the plans
        return await drive(rt, url, "noop_steps", runs, steps)


def pgbench_binary() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pgbench")) or [shutil.which("pgbench") or ""]
    if not found[-1]:
        raise SystemExit("pgbench is not installed (apt-get install postgresql-contrib or postgresql)")
    return found[-1]


async def pgbench_tps(url: str, seconds: int, clients: int, script: Path | None) -> float:
    """pgbench's transactions/s on ``url`` (``pgbench -i``'s tables): ``clients`` clients, ``script``
    (None: pgbench's default TPC-B-like one)."""
    command = [pgbench_binary(), "-n", "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1))]
    command += ["-T", str(seconds), *(["-f", str(script)] if script else []), url]
    done = await anyio.run_process(command, check=True)
    found = re.search(rb"tps = ([0-9.]+)", done.stdout)
    if found is None:
        raise SystemExit(f"pgbench printed no tps:\n{done.stdout.decode()}")
    return float(found.group(1))


async def step_cost(url: str, bench_url: str, args: argparse.Namespace, home: Path) -> dict[str, list[float]]:
    """Each round: 64 runs, pgbench's step script at 8 clients, one run, at 1 client, TPC-B at 1 client
    (reversed every other round); the figures of every round by name."""
    script = home / "step.sql"
    script.write_text(STEP_SCRIPT)
    seconds, steps = args.pgbench_s, args.noop_steps
    measures = {
        "many": lambda: noop_steps(url, MANY_RUNS, max(5, steps // MANY_RUNS * 2), home),
        "step8": lambda: pgbench_tps(bench_url, seconds, PGBENCH_CLIENTS, script),
        "one": lambda: noop_steps(url, 1, steps, home),
        "step1": lambda: pgbench_tps(bench_url, seconds, 1, script),
        "tpcb1": lambda: pgbench_tps(bench_url, seconds, 1, None),
    }
    out: dict[str, list[float]] = {name: [] for name in measures}
    for r in range(args.rounds):
        for name in list(measures)[:: -1 if r % 2 else 1]:
            out[name].append(await measures[name]())
    return out


async def main(args: argparse.Namespace) -> int:
    if args.hosts:
        from bench.scale_hosts import hosts_main  # it imports this module

        return await hosts_main(args)
    home = Path(tempfile.mkdtemp(prefix="rath-scale-"))
    try:
        async with scratch_database(args.server, f"rath_scale_{uuid.uuid4().hex[:10]}") as url:
            await postgres.migrate(parse_store_url(url))
            rates = await scale_out(url, args.slots, args.steps, home)
            async with scratch_database(args.server, f"rath_pgbench_{uuid.uuid4().hex[:10]}") as bench_url:
                await anyio.run_process([pgbench_binary(), "-i", "-q", bench_url], check=True)
                figures = await step_cost(url, bench_url, args, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return report(rates, figures, args)


def report(rates: dict[int, float], figures: dict[str, list[float]], args: argparse.Namespace) -> int:
    efficiency = rates[4] / (4 * rates[1])
    med = {name: statistics.median(values) for name, values in figures.items()}
    many, one = med["many"] / med["step8"], med["one"] / med["step1"]
    print(f"PostgreSQL at {urlsplit(args.server).netloc}; {args.slots} slots per worker, {args.steps} steps per run")
    print("load average: {:.1f} {:.1f} {:.1f}; medians of {} rounds".format(*os.getloadavg(), args.rounds))
    print(f"{'measure':<56} {'value':>10}  target")
    for count in PROCESSES:
        print(f"{f'0.1 s steps/s, {count} worker process(es)':<56} {rates[count]:>10.1f}")
    print(f"{'scale-out efficiency at 4 = sps(4) / (4 * sps(1))':<56} {efficiency:>10.3f}  >= {SCALE_TARGET}")
    lines = [
        (f"no-op durable steps/s, {MANY_RUNS} runs at once", med["many"], ""),
        (f"pgbench tps, {PGBENCH_CLIENTS} clients, UPDATE + INSERT", med["step8"], ""),
        (f"  {MANY_RUNS} runs / pgbench {PGBENCH_CLIENTS} clients", many, f">= {MANY_TARGET}"),
        ("no-op durable steps/s, one run alone", med["one"], ""),
        ("pgbench tps, 1 client, UPDATE + INSERT", med["step1"], ""),
        ("  one run / pgbench 1 client", one, f">= {ONE_TARGET}"),
        ("pgbench tps, 1 client, TPC-B-like (5 statements)", med["tpcb1"], ""),
        ("  one run / TPC-B 1 client (second line, no target)", med["one"] / med["tpcb1"], ""),
    ]
    checks = {
        "scale-out": efficiency >= SCALE_TARGET,
        f"{MANY_RUNS} runs vs pgbench": many >= MANY_TARGET,
        "one run vs pgbench": one >= ONE_TARGET,
    }
    return verdict(lines, checks, 56)


def verdict(lines: list[tuple[str, float, str]], checks: dict[str, bool], width: int) -> int:
    """Print the table's lines (name, value, target) and which targets were missed; 1 when any was."""
    for name, value, target in lines:
        print(f"{name:<{width}} {value:>10.{3 if value < 10 else 1}f}  {target}")
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
    parser.add_argument("--noop-steps", type=int, default=2000, help="no-op steps of the one run (64 runs: 1/32 each)")
    parser.add_argument("--pgbench-s", type=int, default=5, help="seconds each pgbench measurement runs")
    parser.add_argument("--rounds", type=int, default=3, help="rounds taking our runs and pgbench in turn")
    parser.add_argument(
        "--hosts",
        type=int,
        default=0,
        help="instead: workers on N hosts (network namespaces, root), bench/scale_hosts.py",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(anyio.run(main, parse(sys.argv[1:])))
