"""What tracing costs an MCP round trip: the same server with traces off, on, and asked for without the extra.

One command:  .venv/bin/python -m bench.tracing [--calls 300]

Three ``rath-mcp serve`` stdio subprocesses on homes of their own, open side by side and driven by
the same Python SDK client in alternating blocks of back-to-back ``session_get`` calls:

- off: no ``OTEL_*`` variable (the no-op ``Tracing``: no span, no OpenTelemetry import);
- on: ``OTEL_EXPORTER_OTLP_ENDPOINT`` at a local OTLP/HTTP sink in this process (every request a
  SERVER span, batched and exported by the SDK's background thread as a collector would receive it);
- absent: the endpoint set but the ``otel`` extra unimportable (``opentelemetry.sdk`` blocked in the
  child by a ``sitecustomize``), as on a machine without ``rath-mcp[otel]``: it says so and serves untraced.

Then durable no-op steps per second, the same three ways: each measurement is a child process
(``--steps-child MODE``, the mode's environment as above) that queues ``--runs`` runs of ten no-op
steps, then drives them with four workers and its tracing (a ``run`` span per drive, a ``step``
span per step, exported to the same sink when on). Each child is set up as a ``rath-mcp worker``
process is: what loading made is frozen out of the garbage collector's scans (``rath_mcp.__main__``),
and it first drives ``WARM_RUNS`` runs untimed (a long-running worker has long paid the first
export's connection and the first span's imports). ``--rounds`` rounds take the modes in turn, each
round starting with the next mode (so none always runs right after another), and the table gives
each mode's median steps/s and CPU time per step; on a busy machine the CPU ratio is what the wall
clock ratio tends to. The traced process's export process (``runtime/telemetry/export_process.py``:
encoding and sending, on another core) is not in that CPU time; its own is the last column.

Prints calls (steps) per second and the ratio to off; the targets are on >= 0.9x of off and absent
>= 0.9x (within noise), for both. Exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from bench.mcp import Sample, checked, seed_session, timed_blocks

TARGET = 0.9
MODES = ("off", "on", "absent")
#: Runs each steps child drives before it starts timing.
WARM_RUNS = 20


class _Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that reads each export and answers 200 (what a healthy collector does), keeping
    the connection open for the next one as a collector does (HTTP/1.0 would make every export connect)."""

    protocol_version = "HTTP/1.1"
    received = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).received += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def sink() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def server(home: Path, env: dict[str, str]) -> StdioServerParameters:
    argv = ["-m", "rath_mcp", "serve", "--transport", "stdio", "--home", str(home)]
    return StdioServerParameters(command=sys.executable, args=argv, env=env)


def environments(tmp: Path, endpoint: str) -> dict[str, dict[str, str]]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    blocked = tmp / "no-otel"
    blocked.mkdir(parents=True)
    (blocked / "sitecustomize.py").write_text('import sys\nsys.modules["opentelemetry.sdk"] = None\n')
    on = {**base, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
    absent = {**on, "PYTHONPATH": os.pathsep.join(filter(None, [str(blocked), base.get("PYTHONPATH")]))}
    return {"off": base, "on": on, "absent": absent}


async def measure(tmp: Path, endpoint: str, calls: int, warmup: int) -> list[Sample]:
    envs = environments(tmp, endpoint)
    params = {name: server(tmp / name, env) for name, env in envs.items()}
    async with (
        Client(params["off"], mode="legacy") as off,
        Client(params["on"], mode="legacy") as on,
        Client(params["absent"], mode="legacy") as absent,
    ):
        clients = {"off": off, "on": on, "absent": absent}
        sessions = {name: await seed_session(c, 20) for name, c in clients.items()}

        def probe(name: str) -> Callable[[], Awaitable[Any]]:
            return lambda: checked(clients[name], "session_get", {"session_id": sessions[name]})

        return await timed_blocks(calls, warmup, {name: probe(name) for name in clients})


def table(samples: list[Sample]) -> str:
    off = samples[0]
    rows = ["| tracing | calls/s | median ms | p90 ms | x off | target |", "|---|---:|---:|---:|---:|---|"]
    for s in samples:
        ratio = off.median_ms / s.median_ms
        verdict = "-" if s is off else ("ok" if ratio >= TARGET else f"< {TARGET}x")
        per_s = 1000 / s.median_ms
        rows.append(f"| {s.name:<7} | {per_s:7.0f} | {s.median_ms:9.3f} | {s.p90_ms:6.3f} | {ratio:5.2f} | {verdict} |")
    return "\n".join(rows)


def _process_cpu_s(pid: int | None) -> float:
    """CPU time (user and system) process ``pid`` has used so far, from ``/proc`` (0 for none)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def steps_per_s(runs: int) -> tuple[float, float, float]:
    """In a child process: queue ``runs`` ten-step no-op runs, then drive them with this environment's
    tracing (what ``serve``/``worker`` would make of it); committed steps per second, and the process's
    CPU time per step meanwhile in microseconds (steadier than the wall clock on a busy machine), and its
    export process's (0 without one)."""
    import gc
    import time

    from bench.durable import STEPS, TenSteps
    from runtime import Runtime
    from runtime.extras import MissingExtraError
    from runtime.telemetry import Tracing, from_environment

    gc.freeze()  # as a worker process does once loaded (rath_mcp.cli.loaded), before its tracing is made
    try:
        tracing = from_environment()
    except MissingExtraError:  # as serve and worker do: say nothing here, run untraced
        tracing = Tracing()
    with tempfile.TemporaryDirectory(prefix="rath-bench-steps-") as home:
        async with Runtime.open(home, workers=0) as rt:
            rt.workflows.register(TenSteps)
            warm = [(await rt.runs.start(TenSteps.name)).id for _ in range(WARM_RUNS)]  # claimed first
            ids = [(await rt.runs.start(TenSteps.name)).id for _ in range(runs)]
        async with Runtime.open(home, workers=4, synchronous="FULL", tracing=tracing) as rt:
            rt.workflows.register(TenSteps)
            for run_id in warm:
                await rt.runs.wait(run_id, 600)
            exporter = getattr(tracing, "export_pid", None)
            start, cpu, exporting = time.perf_counter(), time.process_time(), _process_cpu_s(exporter)
            for run_id in ids:  # woken by each run's last commit, in this process
                if (await rt.runs.wait(run_id, 600)).status != "succeeded":
                    raise SystemExit(f"run {run_id} did not succeed")
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            exporting = _process_cpu_s(exporter) - exporting
        tracing.shutdown()
    steps = runs * STEPS
    return steps / elapsed, cpu / steps * 1e6, exporting / steps * 1e6


Found = dict[str, list[tuple[float, float, float]]]


def durable_rounds(tmp: Path, endpoint: str, runs: int, rounds: int) -> Found:
    """``rounds`` rounds, each a child process per mode in turn; (steps/s, CPU us/step, the export process's
    CPU us/step) by mode."""
    envs = environments(tmp / "steps", endpoint)
    found: Found = {mode: [] for mode in MODES}
    for turn in range(rounds):
        for mode in MODES[turn % len(MODES) :] + MODES[: turn % len(MODES)]:
            argv = [sys.executable, "-m", "bench.tracing", "--steps-child", mode, "--runs", str(runs)]
            done = subprocess.run(argv, env=envs[mode], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"the {mode} steps child failed:\n{done.stderr[-2000:]}")
            rate, cpu, exporting = done.stdout.strip().splitlines()[-1].split()
            found[mode].append((float(rate), float(cpu), float(exporting)))
    return found


def steps_table(found: Found) -> tuple[str, list[str]]:
    off = statistics.median(rate for rate, _, _ in found["off"])
    off_cpu = statistics.median(cpu for _, cpu, _ in found["off"])
    rows = [
        "| tracing | steps/s (median) | min | max | x off | CPU us/step | CPU x off | target | export CPU us/step |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    missed = []
    for mode in MODES:
        rates = [rate for rate, _, _ in found[mode]]
        median, cpu = statistics.median(rates), statistics.median(cpu for _, cpu, _ in found[mode])
        exporting = statistics.median(spent for _, _, spent in found[mode])
        ratio = median / off
        verdict = "-" if mode == "off" else ("ok" if ratio >= TARGET else f"< {TARGET}x")
        if mode != "off" and ratio < TARGET:
            missed.append(mode)
        spread = f"{min(rates):5.0f} | {max(rates):5.0f}"
        cpus = f"{cpu:11.0f} | {off_cpu / cpu:9.2f}"
        rows.append(f"| {mode:<7} | {median:16.0f} | {spread} | {ratio:5.2f} | {cpus} | {verdict} | {exporting:.0f} |")
    return "\n".join(rows), missed


async def main(calls: int, runs: int, rounds: int) -> int:
    warmup = max(10, calls // 10)
    with tempfile.TemporaryDirectory(prefix="rath-bench-") as tmp, sink() as endpoint:
        samples = await measure(Path(tmp), endpoint, calls, warmup)
        exports = _Sink.received
        found = await anyio.to_thread.run_sync(durable_rounds, Path(tmp), endpoint, runs, rounds)
        step_exports = _Sink.received - exports
    print(f"stdio session_get round trips: {calls} calls per server in blocks taking turns, after {warmup} warm-up;")
    print(f"the traced server's spans reached the local sink in {exports} export(s)\n")
    print(table(samples))
    steps, missed_steps = steps_table(found)
    print(f"\ndurable no-op steps: {runs} runs of 10 steps (after {WARM_RUNS} untimed), 4 workers, SQLite")
    print(f"synchronous=FULL, {rounds} rounds taking turns; the traced children's spans reached the sink in")
    print(f"{step_exports} export(s); load average {' '.join(f'{load:.1f}' for load in os.getloadavg())}\n")
    print(steps)
    off = samples[0]
    missed = [s.name for s in samples[1:] if off.median_ms / s.median_ms < TARGET] + missed_steps
    if exports == 0 or step_exports == 0:
        print("\nno span was exported: the 'on' server did not trace (is the otel extra installed?)")
        return 1
    return 1 if missed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per server (default 300)")
    parser.add_argument("--runs", type=int, default=200, help="ten-step runs per steps measurement (default 200)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of steps measurements (default 5)")
    parser.add_argument("--steps-child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps_child:
        print(*anyio.run(steps_per_s, args.runs))
        sys.exit(0)
    sys.exit(anyio.run(main, args.calls, args.runs, args.rounds))
