"""Retries with backoff, deadlines, step timeouts and cancel (preemptive for sync steps)."""

from __future__ import annotations

import sqlite3
import time
from functools import partial
from pathlib import Path

import anyio
import pytest

from runtime import Run, Runtime, run_worker
from runtime.durable.store import MAX_LOST_LEASES
from runtime.durable.worker import _resilient
from runtime.store.sqlite.backend import sqlite_database
from tests.durable.conftest import FLOWS, eventually
from tests.durable.flows import lines

pytestmark = pytest.mark.anyio


async def progressed(rt: Runtime, run_id: str) -> bool:
    return any(e.type == "step.progress" for e in await rt.runs.events(run_id))


async def test_a_failing_step_is_retried_with_backoff(drt: Runtime) -> None:
    run = await drt.runs.wait((await drt.runs.start("flaky", input={"succeed_on": 3})).id, 10)
    assert run.status == "succeeded" and run.state["attempt"] == 3
    events = await drt.runs.events(run.id)
    failed = [e for e in events if e.type == "step.failed"]
    retried = [e for e in events if e.type == "step.started" and e.data["attempt"] > 1]
    assert [e.data["attempt"] for e in failed] == [1, 2] and [e.data["attempt"] for e in retried] == [2, 3]
    assert all(e.data["retry_in_s"] == 0.3 for e in failed)
    # Each retry was claimed no sooner than its backoff after the failure was recorded. Both times are the
    # store's own (the claim stamps step.started with the instant it compared against next_at), so this
    # holds however slow or loaded the machine is; it fails only if a retry is claimed early.
    for fail, retry in zip(failed, retried, strict=True):
        assert retry.created_at >= fail.created_at + fail.data["retry_in_s"]


async def test_retries_run_out_into_a_failed_run(drt: Runtime) -> None:
    run = await drt.runs.wait((await drt.runs.start("flaky", input={"succeed_on": 9})).id, 10)
    assert run.status == "failed"
    assert run.error == "step 'attempt_it' failed after 3 attempt(s): RuntimeError: attempt 3 fails on purpose"


async def test_a_backoff_does_not_hold_the_claim(home: Path) -> None:
    async with Runtime.open(home, workers=1, lease_s=3600.0) as rt:  # one slot only
        rt.workflows.load(FLOWS)
        flaky = await rt.runs.start("slow_flaky")

        async def backing_off() -> bool:
            run = await rt.runs.get(flaky.id)
            return run.status == "queued" and run.attempt == 2

        await eventually(backing_off)
        run = await rt.runs.get(flaky.id)
        assert run.lease_owner is None and run.next_at > time.time()
        # The single slot is free during the backoff: another run completes meanwhile.
        echo = await rt.runs.start("echo", input={"message": "meanwhile"})
        done = await rt.runs.wait(echo.id, 10)
        assert done.status == "succeeded" and done.updated_at < run.next_at
        assert (await rt.runs.get(flaky.id)).status == "queued"
        assert (await rt.runs.cancel(flaky.id)).status == "cancelled"


async def test_a_sync_step_runs_in_a_child_with_ledgered_effects(drt: Runtime, log: str) -> None:
    run = await drt.runs.wait((await drt.runs.start("sync_charge", input={"log": log})).id, 15)
    assert run.status == "succeeded", run.error
    assert run.state["attempt"] == 2
    assert lines(log) == [f"charge charge:{run.id}"]  # once, replayed on retry
    progress = [e.data["message"] for e in await drt.runs.events(run.id) if e.type == "step.progress"]
    assert progress == ["charged", "charged"]


async def test_cancel_stops_a_long_sync_step_preemptively(drt: Runtime) -> None:
    run = await drt.runs.start("sleepy", input={"sleep_s": 3600})  # it ends early only if it is stopped
    await eventually(lambda: progressed(drt, run.id))
    with anyio.fail_after(60):  # a safety net only
        cancelled = await drt.runs.cancel(run.id, reason="changed my mind")
        if cancelled.status == "running":  # cancel's grace ran out on a loaded machine: the stop is still due
            cancelled = await drt.runs.wait(run.id, 50)
    assert cancelled.status == "cancelled" and cancelled.error == "cancelled: changed my mind"


async def test_cancel_stops_an_async_step(drt: Runtime) -> None:
    run = await drt.runs.start("async_sleepy", input={"sleep_s": 3600})
    await eventually(lambda: progressed(drt, run.id))
    with anyio.fail_after(60):
        cancelled = await drt.runs.cancel(run.id)
        if cancelled.status == "running":
            cancelled = await drt.runs.wait(run.id, 50)
    assert cancelled.status == "cancelled"


async def test_cancel_of_a_waiting_run_expires_its_interrupt(drt: Runtime) -> None:
    run = await drt.runs.wait((await drt.runs.start("approval", input={"message": "x"})).id, 10)
    cancelled = await drt.runs.cancel(run.id)
    assert cancelled.status == "cancelled" and cancelled.pending_interrupts == ()
    assert await drt.runs.interrupts(run.id) == []
    assert (await drt.runs.cancel(run.id)).status == "cancelled"  # cancelling twice is harmless


async def test_a_step_timeout_stops_a_sync_step_preemptively(drt: Runtime) -> None:
    with anyio.fail_after(60):  # the step sleeps 60 s: failing sooner is its timeout at work
        run = await drt.runs.wait((await drt.runs.start("sleepy_with_timeout")).id, 50)
    assert run.status == "failed" and "timed out after 0.5s" in (run.error or "")


async def test_a_deadline_ends_a_running_step_as_timed_out(drt: Runtime) -> None:
    run = await drt.runs.start("async_sleepy", input={"sleep_s": 3600}, deadline_s=0.5)
    with anyio.fail_after(60):
        run = await drt.runs.wait(run.id, 50)
    assert run.status == "timed_out" and "deadline" in (run.error or "")


async def test_a_deadline_ends_a_waiting_run(drt: Runtime) -> None:
    run = await drt.runs.start("approval", input={"message": "x"}, deadline_s=3600)
    run = await drt.runs.wait(run.id, 50)
    assert run.status == "waiting"
    # The hour passes while it waits (a deadline of 0.5 s could instead pass before the run parks, on a
    # loaded machine): the deadline is moved into the past, as the clock would move past it.
    await sqlite_database(drt.store).write(
        lambda c: c.execute("UPDATE runs SET deadline = ? WHERE id = ?", (time.time() - 1, run.id))
    )
    run = await eventually(lambda: _terminal(drt, run.id), timeout=60)
    assert run.status == "timed_out" and run.error == "the run's deadline passed"


async def _terminal(rt: Runtime, run_id: str) -> Run | None:
    run = await rt.runs.get(run_id)
    return run if run.terminal else None


async def test_a_sync_step_cannot_interrupt_and_is_told_why(drt: Runtime, capfd: pytest.CaptureFixture[str]) -> None:
    run = await drt.runs.wait((await drt.runs.start("sync_asks")).id, 10)
    assert run.status == "failed" and "make it an async def to use ctx.interrupt" in (run.error or "")
    out, err = capfd.readouterr()
    assert "noise from a sync step" not in out and "noise from a sync step" in err  # stdout stays clean for stdio


async def test_run_worker_serves_until_stopped_and_drains_the_runs_in_hand(home: Path, tmp_path: Path) -> None:
    gate, log = tmp_path / "gate", str(tmp_path / "log")
    gate.touch()
    async with Runtime.open(home, workers=0, lease_s=3600.0) as rt:
        rt.workflows.load(FLOWS)
        stop = anyio.Event()
        with anyio.fail_after(60):  # a safety net only
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: run_worker(rt.engine, stop, slots=2, drain_s=10))
                run = await rt.runs.start("ledger", input={"log": log, "gate": str(gate)})
                await eventually(lambda: progressed(rt, run.id))
                stop.set()  # no new claims from here on; the run in hand may finish
                await anyio.lowlevel.checkpoint()  # the worker hears of the stop before the late run exists
                late = await rt.runs.start("echo", input={"message": "too late"})
                gate.unlink()
        assert (await rt.runs.get(run.id)).status == "succeeded"
        assert (await rt.runs.get(late.id)).status == "queued"  # left for another worker


async def test_a_worker_that_stops_mid_step_hands_the_run_on_without_counting_a_lost_worker(
    home: Path, tmp_path: Path
) -> None:
    gate, log = tmp_path / "gate", str(tmp_path / "log")
    gate.touch()
    async with Runtime.open(home, workers=0, lease_s=3600.0) as rt:
        rt.workflows.load(FLOWS)
        run = await rt.runs.start("ledger", input={"log": log, "gate": str(gate)})
        for stops in range(1, MAX_LOST_LEASES + 1):
            stop = anyio.Event()
            with anyio.fail_after(60):  # a safety net only
                async with anyio.create_task_group() as tg:
                    tg.start_soon(partial(run_worker, rt.engine, stop, drain_s=0))
                    await eventually(partial(progressed_times, rt, run.id, stops))
                    stop.set()  # the step is still held at its gate: the worker stops it and lets go
            await rt.runs.store.reap()
            assert (await rt.runs.get(run.id)).status == "queued"
        gate.unlink()
        async with anyio.create_task_group() as tg:
            stop = anyio.Event()
            tg.start_soon(lambda: run_worker(rt.engine, stop))
            done = await rt.runs.wait(run.id, 10)
            stop.set()
        assert done.status == "succeeded" and lines(log) == ["a", "b", "done"]


async def progressed_times(rt: Runtime, run_id: str, times: int) -> bool:
    return sum(e.type == "step.progress" for e in await rt.runs.events(run_id)) >= times


async def test_a_worker_loop_survives_an_unexpected_error(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    async def loop() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise sqlite3.OperationalError("disk I/O error")

    with anyio.fail_after(5):
        await _resilient(loop, "claim")
    assert len(calls) == 2 and "durable worker claim loop failed" in caplog.text
