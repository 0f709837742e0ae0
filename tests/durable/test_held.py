"""Held commits (``runtime/durable/held.py``): a chain of read-only steps shares a transaction, and nothing
about a run reads differently for it: the same events, checkpoints and order as one commit a step."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime import EffectClass, Runtime, StepContext, Workflow, step
from runtime.durable.held import MAX_HELD
from runtime.durable.models import Event

pytestmark = pytest.mark.anyio

STEPS = MAX_HELD + 4  # one full chain, then a short one ended by the run's last commit


def _counting_steps(name: str, effects: EffectClass) -> type[Workflow]:
    """A workflow of ``STEPS`` steps in a line, each adding one to ``n``, every step declared ``effects``."""

    def counter(i: int) -> Any:
        async def count(self: Workflow, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
            return {"n": state.get("n", 0) + 1}

        count.__name__ = f"s{i}"
        successors = [f"s{i + 1}"] if i + 1 < STEPS else []
        return step(entry=i == 0, successors=successors, effects=effects)(count)

    steps = {f"s{i}": counter(i) for i in range(STEPS)}
    return type(name.title().replace("_", ""), (Workflow,), {"name": name, "__doc__": "Counting steps.", **steps})


class Gates:
    """Events a test sets to let a step go on, and that steps set to say where they are."""

    def __init__(self) -> None:
        self.go = anyio.Event()
        self.cancelled = anyio.Event()
        self.seen: list[str] = []


@pytest.fixture
async def rt(tmp_path: Path, store: str | None) -> AsyncIterator[Runtime]:
    """On each backend, one worker slot: a run the test holds keeps the only slot (no other worker of this
    runtime claims it). Nothing polls: whatever a test waits for must have been notified."""
    async with Runtime.open(tmp_path, store=store, workers=1, poll_s=3600) as runtime:
        yield runtime


async def _run(rt: Runtime, workflow: str, timeout_s: float = 20) -> tuple[list[Event], list[dict[str, Any]]]:
    run = await rt.runs.start(workflow)
    done = await rt.runs.wait(run.id, timeout_s)
    assert done.status == "succeeded", done.error
    return await rt.runs.events(run.id, limit=1000), await rt.runs.checkpoints(run.id)


async def test_a_chain_of_read_only_steps_reads_exactly_as_if_each_step_had_committed_alone(rt: Runtime) -> None:
    rt.workflows.register(_counting_steps("chained", EffectClass.READ_ONLY))
    rt.workflows.register(_counting_steps("alone", EffectClass.NON_IDEMPOTENT))
    chained, chained_checkpoints = await _run(rt, "chained")
    alone, alone_checkpoints = await _run(rt, "alone")
    assert chained[0].type == alone[0].type == "run.created"  # (which names the workflow)
    assert [(e.seq, e.type, e.data) for e in chained[1:]] == [(e.seq, e.type, e.data) for e in alone[1:]]
    assert [e.seq for e in chained] == list(range(1, len(chained) + 1))
    keep = ("seq", "state", "next_step", "pending")
    assert [{k: c[k] for k in keep} for c in chained_checkpoints] == [
        {k: c[k] for k in keep} for c in alone_checkpoints
    ]
    assert [c["state"]["n"] for c in chained_checkpoints] == list(range(1, STEPS + 1))
    # The first MAX_HELD steps never waited for anything: one transaction made them, at one timestamp.
    first = [e for e in chained if e.type == "step.completed" and int(e.data["step"][1:]) < MAX_HELD]
    assert len(first) == MAX_HELD and len({e.created_at for e in first}) == 1


class WaitsInTheSecondStep(Workflow):
    """A read-only step, then a read-only step that waits for the test."""

    name = "waits_in_the_second_step"
    gates = Gates()

    @step(entry=True, successors=["second"], effects=EffectClass.READ_ONLY)
    async def first(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {"first": True}

    @step(effects=EffectClass.READ_ONLY)
    async def second(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        await self.gates.go.wait()
        return {**state, "second": True}


async def test_a_held_step_is_committed_as_soon_as_the_next_step_waits(rt: Runtime) -> None:
    WaitsInTheSecondStep.gates = gates = Gates()
    rt.workflows.register(WaitsInTheSecondStep)
    run = await rt.runs.start("waits_in_the_second_step")
    with anyio.fail_after(20):  # a hang guard: the first step's commit comes while the second one waits
        async for seen in rt.runs.watch(run.id):
            if seen.step == "second":
                break
    assert seen.state == {"first": True} and not gates.go.is_set()
    gates.go.set()
    done = await rt.runs.wait(run.id, 20)
    assert done.status == "succeeded" and done.state == {"first": True, "second": True}


class ReadOnlyThenEffectful(Workflow):
    """Two read-only steps, one writing a progress note; then a step with effects that reads the run's events."""

    name = "read_only_then_effectful"
    gates = Gates()

    @step(entry=True, successors=["b"], effects=EffectClass.READ_ONLY)
    async def a(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return state

    @step(successors=["c"], effects=EffectClass.NONE)
    async def b(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        await ctx.progress("b is half done")
        return state

    @step(effects=EffectClass.NON_IDEMPOTENT)
    async def c(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        events = await ctx.runtime.runs.events(ctx.run_id, limit=1000)  # type: ignore[attr-defined]
        self.gates.seen = [e.data["step"] for e in events if e.type == "step.completed"]
        return state


async def test_writes_and_steps_with_effects_come_after_every_held_step_is_committed(rt: Runtime) -> None:
    ReadOnlyThenEffectful.gates = gates = Gates()
    rt.workflows.register(ReadOnlyThenEffectful)
    run = await rt.runs.start("read_only_then_effectful")
    assert (await rt.runs.wait(run.id, 20)).status == "succeeded"
    assert gates.seen == ["a", "b"]  # c started once a's and b's commits were made
    kinds = [(e.type, e.data.get("step")) for e in await rt.runs.events(run.id, limit=1000)]
    assert kinds.index(("step.completed", "a")) < kinds.index(("step.progress", "b"))  # a held, then b's note


class FailsThird(Workflow):
    """Two read-only steps, then a read-only step that fails (no retries)."""

    name = "fails_third"

    @step(entry=True, successors=["b"], effects=EffectClass.READ_ONLY)
    async def a(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {"a": 1}

    @step(successors=["c"], effects=EffectClass.READ_ONLY)
    async def b(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "b": 1}

    @step(effects=EffectClass.READ_ONLY)
    async def c(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        raise ValueError("c cannot")


async def test_a_failing_step_commits_the_steps_held_before_it_with_its_failure(rt: Runtime) -> None:
    rt.workflows.register(FailsThird)
    run = await rt.runs.wait((await rt.runs.start("fails_third")).id, 20)
    assert run.status == "failed" and "c cannot" in (run.error or "") and run.state == {"a": 1, "b": 1}
    kinds = [(e.type, e.data.get("step")) for e in await rt.runs.events(run.id, limit=1000)]
    done = [k for k in kinds if k[0] in ("step.completed", "step.failed")]
    assert done == [("step.completed", "a"), ("step.completed", "b"), ("step.failed", "c")]
    assert [c["next_step"] for c in await rt.runs.checkpoints(run.id)] == ["b", "c"]


class LosesItsLease(Workflow):
    """A read-only step during which another worker takes the run over, then a read-only step that waits."""

    name = "loses_its_lease"
    gates = Gates()

    @step(entry=True, successors=["second"], effects=EffectClass.READ_ONLY)
    async def first(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        store = ctx.runtime.runs.store  # type: ignore[attr-defined]
        await store.release([(ctx.run_id, ctx.token)])  # type: ignore[attr-defined]
        await store.reap()  # the run is queued again, for whoever claims it next
        (taken,) = await store.claim("thief", 3600.0, 1, [self.name])
        self.gates.seen.append(f"taken with token {taken.token}")
        return {"first": True}

    @step(effects=EffectClass.READ_ONLY)
    async def second(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        try:
            await anyio.sleep_forever()
        finally:
            self.gates.cancelled.set()
        return state  # pragma: no cover


async def test_a_held_commit_that_finds_the_lease_lost_is_dropped_and_stops_the_run_here(rt: Runtime) -> None:
    LosesItsLease.gates = gates = Gates()
    rt.workflows.register(LosesItsLease)
    run = await rt.runs.start("loses_its_lease")
    with anyio.fail_after(20):  # the held commit fails while the second step waits, which stops that step
        await gates.cancelled.wait()
    assert gates.seen == ["taken with token 2"]
    now = await rt.runs.get(run.id)
    assert now.lease_owner == "thief" and now.step == "first" and now.state == {}
    kinds = [e.type for e in await rt.runs.events(run.id, limit=1000)]
    assert "step.completed" not in kinds  # the first step's commit, fenced out, wrote nothing
