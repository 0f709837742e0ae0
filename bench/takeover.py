"""Prompt takeover: how soon a SIGKILLed ``rath-mcp serve``, restarted on its home, resumes the run it held.

One command:  .venv/bin/python -m bench.takeover [--rounds 3] [--store URL]

Each round: a real ``rath-mcp serve --transport http --lease-s 3600`` starts a run whose step holds
(a gate file), and is SIGKILLed mid-step; then a new server is started on the same home and the
time until the run is claimed again (its ``running`` event, token 2) is measured. The lease is an
hour, so only prompt takeover can resume it; without takeover it would wait the whole lease (30 s
by default). The baseline, in the same run, is the cold start of the same command: spawn until it
listens. The target is that the restarted server resumes the run within 1 s of starting (of
listening; the resume usually comes first, so this figure is often negative), and within 1 s of
``Runtime.open`` when the restart is this process opening the runtime (no interpreter start-up).
Exits 1 when a target is missed. This file is also the ``--workflows`` module the servers load.
"""

from __future__ import annotations

import argparse
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime import EffectClass, Runtime, StepContext, Workflow, step

TARGET_S = 1.0
LEASE_S = "3600"


class Held(Workflow):
    """One step that waits while its gate file exists."""

    name = "bench_held"

    @step(entry=True, effects=EffectClass.NONE)
    async def hold(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        await ctx.progress("holding")
        while Path(state["gate"]).exists():  # noqa: ASYNC110, ASYNC240 - a file the bench removes
            await anyio.sleep(0.01)
        return state


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A ``rath-mcp serve --transport http`` process on a free port, with its spawn and listen times."""

    def __init__(self, home: Path, store: str | None) -> None:
        self.port = _port()
        argv = [sys.executable, "-m", "rath_mcp", "serve", "--transport", "http", "--port", str(self.port)]
        argv += ["--home", str(home), "--lease-s", LEASE_S, "--workflows", __file__]
        argv += ["--store", store] if store else []
        self.spawned = time.time()
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.listening = 0.0

    async def wait_listening(self) -> float:
        with anyio.fail_after(60):
            while True:
                if self.process.poll() is not None:
                    raise SystemExit(f"rath-mcp serve exited with {self.process.returncode}")
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", self.port)
                except OSError:
                    await anyio.sleep(0.005)
                    continue
                await stream.aclose()
                self.listening = time.time()
                return self.listening - self.spawned

    def client(self) -> Any:
        from mcp import Client

        return Client(f"http://127.0.0.1:{self.port}/mcp")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


async def _tool(client: Any, name: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    if result.is_error:
        raise SystemExit(f"{name} failed: {result.content}")
    return dict(result.structured_content)


async def _held_run(home: Path, store: str | None, gate: Path) -> tuple[str, float]:
    """Start a server, start a run that holds, SIGKILL the server mid-step. Returns (run id, cold start s)."""
    gate.touch()  # noqa: ASYNC240 - a local file, instant
    server = Server(home, store)
    cold = await server.wait_listening()
    try:
        async with server.client() as client:
            run = await _tool(client, "run_start", workflow="bench_held", input={"gate": str(gate)})
            with anyio.fail_after(30):
                while not any(e["type"] == "step.progress" for e in await _events(client, run["run_id"])):  # noqa: ASYNC110 - another process's progress
                    await anyio.sleep(0.01)
    finally:
        server.stop(signal.SIGKILL)
    gate.unlink()  # noqa: ASYNC240 - a local file, instant
    return run["run_id"], cold


async def _events(client: Any, run_id: str) -> list[dict[str, Any]]:
    return list((await _tool(client, "run_events", run_id=run_id, limit=1000))["events"])


def _resumed_at(events: list[Any]) -> float | None:
    claims = [e for e in events if e["type"] == "run.state.changed" and e["data"].get("status") == "running"]
    return float(claims[1]["created_at"]) if len(claims) > 1 else None


async def server_round(home: Path, store: str | None, gate: Path) -> dict[str, float]:
    run_id, cold = await _held_run(home, store, gate)
    server = Server(home, store)
    try:
        await server.wait_listening()
        async with server.client() as client:
            done = await _tool(client, "run_wait", run_id=run_id, timeout_s=30)
            resumed = _resumed_at(await _events(client, run_id))
    finally:
        server.stop()
    if done["status"] != "succeeded" or resumed is None:
        raise SystemExit(f"the run was not resumed: {done['status']} {done['error']}")
    return {
        "cold": cold,
        "spawn_to_resume": resumed - server.spawned,
        "listen_to_resume": resumed - server.listening,
    }


async def in_process_round(home: Path, store: str | None, gate: Path) -> float:
    """SIGKILL a server mid-step, then open the runtime here: seconds from ``Runtime.open`` to the resume."""
    run_id, _ = await _held_run(home, store, gate)
    opened = time.time()
    async with Runtime.open(home, store=store, lease_s=float(LEASE_S)) as rt:
        rt.workflows.register(Held)
        run = await rt.runs.wait(run_id, 30)
        resumed = _resumed_at(
            [{"type": e.type, "data": e.data, "created_at": e.created_at} for e in await rt.runs.events(run_id)]
        )
    if run.status != "succeeded" or resumed is None:
        raise SystemExit(f"the run was not resumed: {run.status} {run.error}")
    return resumed - opened


async def measure(rounds: int, store: str | None) -> int:
    rows: dict[str, list[float]] = {"cold": [], "spawn_to_resume": [], "listen_to_resume": [], "open_to_resume": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(rounds):
            home = Path(tmp) / f"home{k}"
            for name, value in (await server_round(home, store, Path(tmp) / f"gate{k}")).items():
                rows[name].append(value)
            rows["open_to_resume"].append(await in_process_round(home, store, Path(tmp) / f"gate{k}b"))
    labels = {
        "cold": "cold start of serve (spawn -> listening)",
        "spawn_to_resume": "restarted serve: spawn -> resumed",
        "listen_to_resume": "restarted serve: listening -> resumed",
        "open_to_resume": "in process: Runtime.open -> resumed",
    }
    print(f"{'takeover (lease ' + LEASE_S + ' s)':<44} {'median s':>9} {'max s':>7}  rounds")
    for name, values in rows.items():
        print(f"{labels[name]:<44} {statistics.median(values):>9.3f} {max(values):>7.3f}  {len(values)}")
    missed = [n for n in ("listen_to_resume", "open_to_resume") if statistics.median(rows[n]) > TARGET_S]
    verdict = "met" if not missed else f"NOT met ({', '.join(labels[n] for n in missed)})"
    print(f"target: resumed within {TARGET_S:.0f} s of the restarted server starting: {verdict}")
    return 1 if missed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store", help="a postgresql:// URL (migrated) instead of each home's SQLite file")
    args = parser.parse_args()
    sys.exit(anyio.run(measure, args.rounds, args.store))


if __name__ == "__main__":
    main()
