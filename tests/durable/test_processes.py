"""Several real processes on one SQLite file: claim races, SIGKILL mid-step, restart between decisions."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from runtime import Runtime
from tests.durable.conftest import FLOWS, eventually, spawn
from tests.durable.flows import lines

pytestmark = pytest.mark.anyio


@contextmanager
def process(*args: str) -> Iterator[subprocess.Popen[str]]:
    """A ``tests.durable.proc`` subprocess, always killed and reaped at the end."""
    proc = spawn(*args)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


async def readline(proc: subprocess.Popen[str], timeout: float = 20) -> str:
    assert proc.stdout is not None
    with anyio.fail_after(timeout):
        line = await anyio.to_thread.run_sync(proc.stdout.readline, abandon_on_cancel=True)
    if not line:
        raise AssertionError(f"process exited: {proc.wait()} {proc.stderr.read() if proc.stderr else ''}")
    return line.strip()


async def test_two_processes_racing_to_claim_one_run_exactly_one_wins(home: Path, tmp_path: Path) -> None:
    rounds = 8
    args = ("claim", str(home), str(tmp_path), str(rounds))
    with process(*args) as p1, process(*args) as p2:
        assert await readline(p1) == "ready" and await readline(p2) == "ready"
        async with Runtime.open(home, workers=0) as rt:
            for k in range(rounds):
                run = await rt.runs.start("echo", input={"message": str(k)})
                (tmp_path / f"go{k}").touch()  # both processes go for it at once
                claims = json.loads(await readline(p1)) + json.loads(await readline(p2))
                assert claims == [[run.id, 1]], f"round {k}: {claims}"  # exactly one winner
                claimed = await rt.runs.get(run.id)
                assert claimed.status == "running" and claimed.lease_token == 1


async def test_a_worker_killed_mid_step_is_finished_by_another_with_each_effect_once(
    home: Path, tmp_path: Path
) -> None:
    gate, log = tmp_path / "gate", str(tmp_path / "log")
    gate.touch()
    async with Runtime.open(home, workers=0) as rt:
        rt.workflows.load(FLOWS)
        run = await rt.runs.start("ledger", input={"log": log, "gate": str(gate)})
        with process("worker", str(home), "3600") as worker:
            assert await readline(worker) == "ready"
            await eventually(lambda: _progressed(rt, run.id))  # a and b are done, the step holds
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=10)
        assert (await rt.runs.get(run.id)).status == "running"  # nobody knows yet
    gate.unlink()
    async with Runtime.open(home, lease_s=3600.0) as rt:
        rt.workflows.load(FLOWS)
        done = await rt.runs.wait(run.id, 20)
        events = await rt.runs.events(run.id, limit=1000)
    assert done.status == "succeeded", done.error
    assert lines(log) == ["a", "b", "done"]  # a and b replayed from the ledger, not repeated
    assert done.state["results"] == ["a", "b", None]
    assert "lease.taken_over" in [e.type for e in events]  # its process was seen gone: no waiting for the lease
    tokens = [e.data["token"] for e in events if e.type == "run.state.changed" and e.data.get("status") == "running"]
    assert tokens == [1, 2]


@pytest.mark.parametrize("outcome", ["applied", "not_applied"])
async def test_a_kill_inside_a_non_idempotent_effect_makes_it_ambiguous_until_resolved(
    home: Path, tmp_path: Path, outcome: str
) -> None:
    gate, log = tmp_path / "effect_gate", str(tmp_path / "log")
    gate.touch()
    async with Runtime.open(home, workers=0) as rt:
        rt.workflows.load(FLOWS)
        run = await rt.runs.start("ledger", input={"log": log, "effect_gate": str(gate)})
        with process("worker", str(home), "3600") as worker:
            assert await readline(worker) == "ready"
            await eventually(lambda: _has_line(log, "c-start"))
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=10)
    gate.unlink()
    async with Runtime.open(home, lease_s=3600.0) as rt:
        rt.workflows.load(FLOWS)
        review = await rt.runs.wait(run.id, 20)
        assert review.status == "needs_review" and "resolve_effect" in (review.error or "")
        (ambiguous,) = await rt.runs.effects("ambiguous")
        assert ambiguous.key == "c" and ambiguous.run_id == run.id
        resumed = await rt.runs.resolve_effect(ambiguous.id, outcome, "c-result" if outcome == "applied" else None)
        assert resumed.status in ("queued", "running", "succeeded")
        done = await rt.runs.wait(run.id, 20)
    assert done.status == "succeeded", done.error
    if outcome == "applied":  # replayed with the result the human gave
        assert lines(log) == ["a", "b", "c-start", "done"] and done.state["results"] == ["a", "b", "c-result"]
    else:  # run again, once
        assert lines(log) == ["a", "b", "c-start", "c-start", "done"] and done.state["results"] == ["a", "b", "c"]


async def test_an_interrupt_decided_after_a_process_restart_resumes_the_run(home: Path) -> None:
    with process("start-approval", str(home)) as starter:
        parked = json.loads(await readline(starter))
        assert starter.wait(timeout=20) == 0  # that process is gone
    assert parked["status"] == "waiting"
    async with Runtime.open(home) as rt:
        (pending,) = await rt.runs.interrupts(parked["run_id"])
        await rt.runs.resolve_interrupt(pending.id, "approve", actor="reviewer")
        done = await rt.runs.wait(parked["run_id"], 20)
        assert done.status == "succeeded" and done.state["outcome"] == "approved"
        out = await rt.sessions.get(done.output_session_id or "")
        assert out.chunks[-1].content == "v2 is out"
        assert [c.name for c in out.chunks[-3:-1]] == ["interrupt", "decision"]  # the question, then its answer
        assert "approve" in out.chunks[-2].content and "by reviewer" in out.chunks[-2].content
        noted = await rt.sessions.get(out.parents[0])  # the decision's snapshot, on the parked session
        assert noted.parents == (parked["session_id"],)


async def _progressed(rt: Runtime, run_id: str) -> bool:
    return any(e.type == "step.progress" for e in await rt.runs.events(run_id))


async def _has_line(log: str, line: str) -> bool:
    return line in lines(log)


async def test_cancel_reaches_a_sync_step_running_in_another_process(home: Path) -> None:
    async with Runtime.open(home, workers=0) as rt:
        rt.workflows.load(FLOWS)
        run = await rt.runs.start("sleepy", input={"sleep_s": 3600})  # it ends early only if it is stopped
        with process("worker", str(home), "30") as worker:
            assert await readline(worker) == "ready"
            await eventually(lambda: _progressed(rt, run.id))
            with anyio.fail_after(60):  # a safety net only
                cancelled = await rt.runs.cancel(run.id, reason="from elsewhere")
                if cancelled.status == "running":  # cancel's grace (5 s) ran out on a loaded machine: the stop is due
                    cancelled = await rt.runs.wait(run.id, 50)
            assert worker.poll() is None  # the worker process lives on; only the step was stopped
        assert cancelled.status == "cancelled" and cancelled.error == "cancelled: from elsewhere"


async def test_watch_sees_changes_made_by_another_process(home: Path, tmp_path: Path) -> None:
    gate, log = tmp_path / "gate", str(tmp_path / "log")
    gate.touch()
    async with Runtime.open(home, workers=0) as rt:
        rt.workflows.load(FLOWS)
        run = await rt.runs.start("ledger", input={"log": log, "gate": str(gate)})
        statuses: list[str] = []
        with process("worker", str(home), "30") as worker:
            assert await readline(worker) == "ready"
            with anyio.fail_after(20):
                async for changed in rt.runs.watch(run.id):
                    statuses.append(changed.status)
                    if changed.status == "running" and gate.exists():
                        gate.unlink()
    assert statuses[-1] == "succeeded" and "running" in statuses  # (the first may be queued or running)
