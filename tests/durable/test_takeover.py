"""Prompt takeover with real processes: a dead holder's runs are taken over at once, not when its lease ends.

Every lease here is an hour long (``--lease-s 3600``), far beyond any wait in these tests: a run
that resumes can only have been taken over because its holder process was seen gone. How long the
takeover took is printed and recorded (``record_property``), never asserted: ``bench/takeover.py``
holds the target.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from runtime import Runtime
from tests.durable.conftest import FLOWS, ROOT, eventually
from tests.durable.flows import lines
from tests.durable.test_processes import process, readline
from tests.mcp.conftest import call
from tests.transports._servers import client_for, http_server

pytestmark = pytest.mark.anyio
FLOWS_FILE = str(ROOT / "tests" / "durable" / "flows.py")
HOUR = "3600"


async def _holding(client: Client, run_id: str) -> bool:
    page = await call(client, "run_events", run_id=run_id, limit=1000)
    return any(e["type"] == "step.progress" for e in page["events"])


def _claims(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "run.state.changed" and e["data"].get("status") == "running"]


async def test_a_sigkilled_server_restarted_on_its_home_resumes_the_run_at_once(
    home: Path, tmp_path: Path, store: str | None, record_property: Any
) -> None:
    gate, log = tmp_path / "gate", tmp_path / "log"
    gate.touch()
    flags = ("--lease-s", HOUR, "--workflows", FLOWS_FILE, *(("--store", store) if store else ()))
    async with http_server("http", home, *flags) as first:
        async with client_for("http", "legacy", home, first) as client:
            run = await call(client, "run_start", workflow="ledger", input={"log": str(log), "gate": str(gate)})
            await eventually(lambda: _holding(client, run["run_id"]), timeout=30)  # a and b done, the step holds
        first.process.send_signal(signal.SIGKILL)
        await first.process.wait()
    gate.unlink()  # the resumed step may finish
    spawned = time.time()
    async with http_server("http", home, *flags) as second, client_for("http", "legacy", home, second) as client:
        done = await call(client, "run_wait", run_id=run["run_id"], timeout_s=40)
        events = (await call(client, "run_events", run_id=run["run_id"], limit=1000))["events"]
    assert done["status"] == "succeeded", done["error"]
    assert lines(log) == ["a", "b", "done"]  # the effects before the kill were replayed, not repeated
    taken = [e for e in events if e["type"] == "lease.taken_over"]
    assert len(taken) == 1 and taken[0]["data"]["token"] == 1
    first_claim, second_claim = _claims(events)
    assert (first_claim["data"]["token"], second_claim["data"]["token"]) == (1, 2)
    assert first_claim["data"]["worker"] != second_claim["data"]["worker"]
    takeover_s = second_claim["created_at"] - spawned
    record_property("takeover_s", round(takeover_s, 3))
    print(f"takeover: the restarted server resumed the run {takeover_s:.2f} s after it was spawned (lease 3600 s)")


async def test_a_running_worker_takes_over_a_process_that_dies_beside_it(home: Path, tmp_path: Path) -> None:
    gate, log = tmp_path / "gate", str(tmp_path / "log")
    gate.touch()
    async with Runtime.open(home, workers=0) as starter:
        starter.workflows.load(FLOWS)
        run = await starter.runs.start("ledger", input={"log": log, "gate": str(gate)})
    # This runtime's worker runs all along, but knows no "ledger": it cannot claim the run itself.
    async with Runtime.open(home, workers=2, lease_s=float(HOUR)) as rt:
        with process("worker", str(home), HOUR) as other:
            assert await readline(other) == "ready"
            await eventually(lambda: _progressed(rt, run.id))
            other.send_signal(signal.SIGKILL)
            other.wait(timeout=10)
            killed = time.time()
        requeued = await eventually(lambda: _requeued(rt, run.id), timeout=20)
        print(f"takeover: a running worker requeued the run {requeued - killed:.2f} s after its holder was killed")
        gate.unlink()
        rt.workflows.load(FLOWS)
        done = await rt.runs.wait(run.id, 30)
    assert done.status == "succeeded" and lines(log) == ["a", "b", "done"]
    assert done.lease_token == 2


async def _progressed(rt: Runtime, run_id: str) -> bool:
    return any(e.type == "step.progress" for e in await rt.runs.events(run_id))


async def _requeued(rt: Runtime, run_id: str) -> float | None:
    taken = [e for e in await rt.runs.events(run_id) if e.type == "lease.taken_over"]
    return taken[0].created_at if taken else None
