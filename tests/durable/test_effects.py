"""The effect ledger and interrupts: replay not repeat, distinct interrupts, fencing, live leases untouched."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import anyio
import pytest

from runtime import ConflictError, InvalidInputError, Runtime
from runtime.durable import Worker
from runtime.durable.context import LiveContext
from runtime.durable.store import MAX_LOST_LEASES, StepCommit
from runtime.errors import LeaseLostError
from runtime.ids import now
from runtime.store.sqlite.backend import sqlite_database
from tests.durable.conftest import FLOWS, eventually
from tests.durable.flows import lines, record

pytestmark = pytest.mark.anyio


async def test_effects_before_an_interrupt_are_replayed_and_each_interrupt_is_distinct(drt: Runtime, log: str) -> None:
    run = await drt.runs.wait((await drt.runs.start("questions", input={"log": log})).id, 10)
    assert run.status == "waiting" and lines(log) == ["before"]
    (first,) = run.pending_interrupts
    assert first.kind == "input" and first.prompt == "first?" and first.schema_ == {"type": "string"}
    await drt.runs.resolve_interrupt(first.id, "respond", "blue")
    run = await drt.runs.wait(run.id, 10)
    (second,) = run.pending_interrupts
    assert second.id != first.id and second.kind == "approval"  # not the first decision again
    assert lines(log) == ["before", "between"]  # "before" was replayed, not repeated
    await drt.runs.resolve_interrupt(second.id, "approve")
    run = await drt.runs.wait(run.id, 10)
    assert run.status == "succeeded" and run.state["answers"] == ["blue", "approve"]
    assert lines(log) == ["before", "between"]
    effects = await drt.runs.effects(status=None, run_id=run.id)
    assert sorted((e.key, e.status) for e in effects) == [
        ("before", "succeeded"),
        ("between", "succeeded"),
        (f"decision:{first.id}", "succeeded"),  # each question and answer written to the session once
        (f"decision:{second.id}", "succeeded"),
    ]
    assert {e.key: e.result for e in effects if not e.key.startswith("decision:")} == {
        "before": "before",
        "between": "between",
    }


async def test_an_expired_interrupt_ends_the_run_timed_out(drt: Runtime, log: str) -> None:
    run = await drt.runs.wait((await drt.runs.start("questions", input={"log": log, "timeout_s": 3600})).id, 10)
    await drt.runs.resolve_interrupt(run.pending_interrupts[0].id, "respond", "x")
    run = await drt.runs.wait(run.id, 10)
    assert run.status == "waiting" and run.pending_interrupts[0].expires_at is not None
    # The hour passes while it waits (a timeout of 0.2 s could instead pass, and the reaper end the run,
    # before this wait read it waiting, on a loaded machine): the expiry is moved into the past, as the
    # clock would move past it.
    await sqlite_database(drt.store).write(
        lambda c: c.execute(
            "UPDATE run_interrupts SET expires_at = ? WHERE id = ?", (now() - 1, run.pending_interrupts[0].id)
        )
    )

    async def timed_out() -> bool:
        return (await drt.runs.get(run.id)).status == "timed_out"

    await eventually(timed_out)
    assert (await drt.runs.get(run.id)).error == f"interrupt {run.pending_interrupts[0].id} expired undecided"
    events = [e.type for e in await drt.runs.events(run.id)]
    assert "interrupt.expired" in events
    assert await drt.runs.interrupts(run.id) == []


async def test_a_stale_workers_commit_is_rejected(home: Path, log: str) -> None:
    async with Runtime.open(home, workers=0) as rt:
        rt.workflows.load(FLOWS)
        run = await rt.runs.start("loop", input={"n": 1})
        old, new = Worker(rt.engine, lease_s=0.2), Worker(rt.engine, lease_s=30)
        (claimed,) = await old.claim(1)
        stale = claimed.token
        await eventually(lambda: _after(claimed.lease_expires))
        assert await rt.runs.store.reap() == [run.id]
        (reclaimed,) = await new.claim(1)
        assert reclaimed.token == stale + 1
        with pytest.raises(LeaseLostError, match=f"fencing token {stale} is stale"):
            await rt.runs.store.commit(StepCommit(run.id, stale, {"state": '{"hacked": 1}'}, []))
        after = await rt.runs.get(run.id)
        assert after.state == {"n": 1} and after.lease_token == stale + 1 and after.lease_owner == new.owner
        assert "lease.expired" in [e.type for e in await rt.runs.events(run.id)]
        # The stale worker cannot even start a ledgered effect: the side effect never happens.
        ctx = LiveContext(
            rt.engine, rt.runs.store, run_id=run.id, token=stale, step="inc", visit=1, attempt=1, session_id=None,
            input={}, state_json="{}", idempotency_key=None,
        )  # fmt: skip
        with pytest.raises(LeaseLostError):
            await ctx.effect("pay", lambda: record(log, "paid"))
        with pytest.raises(LeaseLostError):
            await ctx.interrupt("approval", prompt="too late")
        assert lines(log) == [] and await rt.runs.effects(status=None, run_id=run.id) == []
        assert await rt.runs.interrupts(run.id) == []


async def _after(t: float) -> bool:
    return now() > t


async def test_reconciliation_never_touches_a_call_whose_worker_holds_its_lease(home: Path, tmp_path: Path) -> None:
    gate, log = tmp_path / "gate", str(tmp_path / "log")
    gate.touch()
    async with Runtime.open(home, lease_s=1.0, workers=1) as a, Runtime.open(home, lease_s=1.0, workers=1) as b:
        a.workflows.load(FLOWS)
        b.workflows.load(FLOWS)
        run = await a.runs.start("ledger", input={"log": log, "effect_gate": str(gate)})
        await eventually(lambda: _has_line(log, "c-start"))
        await anyio.sleep(2.5)  # a negative check: several lease periods pass with both reapers running
        (c,) = [e for e in await b.runs.effects(status=None, run_id=run.id) if e.key == "c"]
        assert c.status == "dispatched"
        assert (await b.runs.get(run.id)).status == "running"
        assert "lease.expired" not in [e.type for e in await b.runs.events(run.id)]
        gate.unlink()
        done = await a.runs.wait(run.id, 10)
    assert done.status == "succeeded" and done.state["results"] == ["a", "b", "c"]
    assert lines(log) == ["a", "b", "c-start", "done"]


async def _has_line(log: str, line: str) -> bool:
    return line in lines(log)


async def test_a_step_that_fails_mid_effect_needs_review_and_resumes_once_resolved(
    drt: Runtime, log: str, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    run = await drt.runs.wait(
        (await drt.runs.start("timed_effect", input={"log": log, "effect_gate": str(gate)})).id, 10
    )
    assert run.status == "needs_review" and "in flight" in (run.error or "")
    (pay,) = await drt.runs.effects("ambiguous")
    assert (pay.key, pay.effect_class) == ("pay", "non_idempotent")
    with pytest.raises(InvalidInputError, match="outcome 'maybe'"):
        await drt.runs.resolve_effect(pay.id, "maybe")
    gate.unlink()
    await drt.runs.resolve_effect(pay.id, "not_applied")
    with pytest.raises(ConflictError, match="not ambiguous"):
        await drt.runs.resolve_effect(pay.id, "applied")
    done = await drt.runs.wait(run.id, 10)
    assert done.status == "succeeded" and done.state["paid"] == "paid"
    assert lines(log) == ["pay-start", "pay-start"]
    assert await drt.runs.effects("ambiguous") == []


async def test_a_step_that_keeps_losing_its_worker_fails_the_run(home: Path) -> None:
    async with Runtime.open(home, workers=0) as rt:
        rt.workflows.load(FLOWS)
        run = await rt.runs.start("loop", input={"n": 1})
        for _ in range(MAX_LOST_LEASES):
            (claimed,) = await Worker(rt.engine, lease_s=0.1).claim(1)  # a worker that then "dies"
            await eventually(partial(_after, claimed.lease_expires))
            await rt.runs.store.reap()
        failed = await rt.runs.get(run.id)
        assert failed.status == "failed" and f"lost its worker {MAX_LOST_LEASES} times" in (failed.error or "")
