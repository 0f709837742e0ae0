"""Workers on several hosts: ``python -m bench.scale --hosts 3`` (root: it makes network namespaces).

Each host is a network namespace with a veth link to this machine (``tests/store/postgres/netns.py``;
a hostname and pid namespace of its own too), made and removed by the bench. PostgreSQL listens on
localhost only, so on each host's link a proxy process of its own (``tests/store/postgres/delay_proxy.py``)
carries the connections to it, passing every chunk on 0, 1 or 5 ms later each way (one port per
delay; this kernel has no ``netem``). A ``rath-mcp worker`` in a host reaches the store at the port of
the delay measured. Runs are queued from this machine (its runtime has no workers) and timed by the
store's own timestamps (``bench.scale.drive``). ``--rounds`` rounds take every measurement in turn,
the order flipped each round; medians.

- **scale-out across hosts**: ``wait_steps`` runs (0.1 s steps, ``--steps`` each), ``--slots`` per
  host, on 1 host and on N, at 1 ms and at 5 ms. Target: steps/s(N) / (N × steps/s(1)) >= 0.9 at each.
- **latency**: ``noop_steps`` runs (a durable commit a step), 64 at once spread over the N hosts, at 0,
  1 and 5 ms; and, with no proxy, the same N workers on this machine at 127.0.0.1 (what the proxy
  itself costs). Target: steps/s at 5 ms >= 0.5x steps/s at 0 ms (the same path, no delay added).

It prints a table with the load average and exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from bench.scale import MANY_RUNS, drive, scratch_database, verdict, worker_command, worker_processes
from runtime import Runtime
from runtime.store import parse_store_url
from runtime.store.postgres import backend as postgres
from tests.store.postgres import delay_proxy, netns
from tests.store.postgres.netns import Host

DELAYS_MS = (0.0, 1.0, 5.0)
SCALE_DELAYS_MS = (1.0, 5.0)
HOSTS_SCALE_TARGET = 0.9
LATENCY_TARGET = 0.5  # no-op steps/s at 5 ms / at 0 ms
DIRECT = None  # as a delay: the no-op measurement without proxy or namespaces, workers on this machine


def via(url: str, listener: delay_proxy.Listener) -> str:
    """``url`` reached at the proxy's ``listener`` instead of the server."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    return urlunsplit((parts.scheme, f"{user}@" * bool(user) + f"{listener.host}:{listener.port}", parts.path, "", ""))


class Fleet:
    """The hosts and their proxies: where a worker of host ``i`` reaches the store at a delay."""

    def __init__(self, url: str, machines: list[Host], listeners: list[list[delay_proxy.Listener]]) -> None:
        self.url, self.machines = url, machines
        self.at = {(i, lis.delay_ms): via(url, lis) for i, found in enumerate(listeners) for lis in found}

    def commands(self, hosts: int, delay: float | None, slots: int, home: Path) -> list[list[str]]:
        """Worker commands on the first ``hosts`` hosts at ``delay`` ms (``DIRECT``: on this machine)."""
        if delay is DIRECT:
            return [worker_command(self.url, slots, home / f"d{i}") for i in range(hosts)]
        homes = [home / f"h{i}-{delay}" for i in range(hosts)]
        return [
            m.command(worker_command(self.at[i, delay], slots, homes[i])) for i, m in enumerate(self.machines[:hosts])
        ]


@asynccontextmanager
async def fleet(url: str, count: int) -> AsyncIterator[Fleet]:
    """``count`` hosts, each with a proxy process of its own listening on its link once per delay."""
    with netns.hosts(count) as machines:
        async with AsyncExitStack() as stack:
            listeners = [
                await stack.enter_async_context(delay_proxy.start([(m.outer, d) for d in DELAYS_MS])) for m in machines
            ]
            yield Fleet(url, machines, listeners)


async def round_trip_ms(url: str) -> float:
    """Median time of ``SELECT 1`` on one connection (20 after 5 to warm up)."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        times = []
        for i in range(25):
            t0 = time.perf_counter()
            await conn.fetchval("SELECT 1")
            if i >= 5:
                times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1000
    finally:
        await conn.close()


async def on_hosts(
    rt: Runtime, f: Fleet, hosts: int, delay: float | None, workflow: str, runs: int, steps: int, slots: int, home: Path
) -> float:
    """Committed steps/s of ``runs`` runs of ``workflow`` driven by workers on ``hosts`` hosts at ``delay``."""
    # unshare, the wrapper of a host's worker, ignores SIGTERM; SIGKILL takes the host's processes with it
    # (every run has ended by then: nothing is lost)
    stop = signal.SIGTERM if delay is DIRECT else signal.SIGKILL
    async with worker_processes(f.url, f.commands(hosts, delay, slots, home), stop):
        await drive(rt, f.url, workflow, hosts, 2)  # warm up: every process imports and connects
        return await drive(rt, f.url, workflow, runs, steps)


async def measure(url: str, args: argparse.Namespace, home: Path) -> tuple[dict[str, list[float]], dict[str, float]]:
    n = args.hosts
    noop_slots = -(-MANY_RUNS // n)  # every one of the 64 runs has a slot somewhere
    noop_steps = max(5, args.noop_steps // MANY_RUNS * 2)
    async with fleet(url, n) as f, Runtime.open(home / "client", store=url, workers=0) as rt:
        rt.workflows.load("bench.scale_flows")
        rtt = {f"{d:g}": await round_trip_ms(f.at[0, d]) for d in DELAYS_MS}
        measures: dict[str, tuple[int, float | None, str, int, int, int]] = {}
        for d in SCALE_DELAYS_MS:
            for hosts in (1, n):
                measures[f"wait {hosts} {d:g}"] = (hosts, d, "wait_steps", hosts * args.slots, args.steps, args.slots)
        for delay in (*DELAYS_MS, DIRECT):
            name = "noop direct" if delay is DIRECT else f"noop {delay:g}"
            measures[name] = (n, delay, "noop_steps", MANY_RUNS, noop_steps, noop_slots)
        out: dict[str, list[float]] = {name: [] for name in measures}
        for r in range(args.rounds):
            for name in list(measures)[:: -1 if r % 2 else 1]:
                hosts, delay, workflow, runs, steps, slots = measures[name]
                where = home / f"r{r}" / name.replace(" ", "-")
                out[name].append(await on_hosts(rt, f, hosts, delay, workflow, runs, steps, slots, where))
    return out, rtt


async def hosts_main(args: argparse.Namespace) -> int:
    why = netns.why_not()
    if why is not None:
        raise SystemExit(f"--hosts needs {why}")
    home = Path(tempfile.mkdtemp(prefix="rath-scale-hosts-"))
    load_before = os.getloadavg()
    try:
        async with scratch_database(args.server, f"rath_scale_{uuid.uuid4().hex[:10]}") as url:
            await postgres.migrate(parse_store_url(url))
            figures, rtt = await measure(url, args, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return report(figures, rtt, load_before, args)


def report(
    figures: dict[str, list[float]],
    rtt: dict[str, float],
    load_before: tuple[float, float, float],
    args: argparse.Namespace,
) -> int:
    n = args.hosts
    med = {name: statistics.median(values) for name, values in figures.items()}
    where = urlsplit(args.server).netloc
    print(f"PostgreSQL at {where}, reached from {n} hosts (network namespaces) through a delaying proxy")
    print("load average: {:.1f} {:.1f} {:.1f} at the start, ".format(*load_before), end="")
    print("{:.1f} {:.1f} {:.1f} at the end; medians of {} rounds".format(*os.getloadavg(), args.rounds))
    print(f"{'measure':<60} {'value':>10}  target")
    rows: list[tuple[str, float, str]] = []
    for each_way, ms in rtt.items():
        rows.append((f"SELECT 1 round trip through the proxy, {each_way} ms each way (ms)", ms, ""))
    checks = {}
    for d in SCALE_DELAYS_MS:
        one, many = med[f"wait 1 {d:g}"], med[f"wait {n} {d:g}"]
        efficiency = many / (n * one)
        each = zip(figures[f"wait 1 {d:g}"], figures[f"wait {n} {d:g}"], strict=True)
        rounds = " ".join(f"{m / (n * o):.2f}" for o, m in each)
        rows.append((f"0.1 s steps/s, {args.slots} runs on 1 host, {d:g} ms", one, ""))
        rows.append((f"0.1 s steps/s, {n * args.slots} runs on {n} hosts, {d:g} ms", many, ""))
        target = f">= {HOSTS_SCALE_TARGET} (rounds: {rounds})"
        rows.append((f"  scale-out efficiency 1 -> {n} hosts at {d:g} ms", efficiency, target))
        checks[f"scale-out at {d:g} ms"] = efficiency >= HOSTS_SCALE_TARGET
    rows.append((f"no-op steps/s, {MANY_RUNS} runs, {n} workers here, no proxy", med["noop direct"], ""))
    for d in DELAYS_MS:
        rows.append((f"no-op steps/s, {MANY_RUNS} runs on {n} hosts, {d:g} ms", med[f"noop {d:g}"], ""))
    latency = med["noop 5"] / med["noop 0"]
    rounds = " ".join(f"{a / b:.2f}" for a, b in zip(figures["noop 5"], figures["noop 0"], strict=True))
    rows.append(("  5 ms / 0 ms", latency, f">= {LATENCY_TARGET} (rounds: {rounds})"))
    checks["no-op steps at 5 ms"] = latency >= LATENCY_TARGET
    rows.append(
        ("  5 ms / no proxy (second line: the proxy's own cost counted)", med["noop 5"] / med["noop direct"], "")
    )
    return verdict(rows, checks, 60)
