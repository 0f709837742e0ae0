"""A run left with an ambiguous effect: a real ``rath-mcp worker`` process is SIGKILLed inside a
non-idempotent effect (the durable layer's ``ledger`` test workflow, whose effects append lines to
a log file and wait on a gate file)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import anyio
from mcp import Client

from rath_mcp.server import build_server
from runtime import Runtime
from tests.mcp.conftest import call

FLOWS = "tests.durable.flows"


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def kill_worker_mid_effect(home: Path, log: Path, gate: Path) -> str:
    """Start a ``ledger`` run, let a worker process reach effect ``c``, SIGKILL it; return the run id."""
    await anyio.Path(gate).touch()
    async with Runtime.open(home, workers=0) as rt:
        rt.workflows.load(FLOWS)
        async with Client(build_server(rt), mode="legacy") as client:
            run = await call(client, "run_start", workflow="ledger", input={"log": str(log), "effect_gate": str(gate)})
    command = [sys.executable, "-m", "rath_mcp", "worker", "--home", str(home), "--workflows", FLOWS]
    worker = await anyio.open_process([*command, "--lease-s", "3600"], stderr=subprocess.DEVNULL)
    async with worker:
        with anyio.fail_after(30):  # another process writes the log: poll it
            while "c-start" not in lines(log):  # noqa: ASYNC110
                await anyio.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        await worker.wait()
    await anyio.Path(gate).unlink()
    return str(run["run_id"])
