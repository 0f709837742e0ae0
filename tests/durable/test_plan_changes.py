"""A run that outlives a change to its workflow's definition: it goes on with the new plan and says so,
or fails clearly when the step it was at is gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import EffectClass, Runtime, StepContext, Workflow, step

pytestmark = pytest.mark.anyio


class ReviewV1(Workflow):
    name = "review"

    @step(entry=True, effects=EffectClass.NONE)
    async def ask(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        answer = await ctx.interrupt("approval", prompt="ok?")
        return {**state, "answer": answer.value, "by": "v1"}


class ReviewV2(Workflow):
    """The same step, edited: a new plan hash."""

    name = "review"

    @step(entry=True, effects=EffectClass.NONE)
    async def ask(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        answer = await ctx.interrupt("approval", prompt="ok?")
        return {**state, "answer": answer.value, "by": "v2"}


class ReviewRenamed(Workflow):
    """The step the run waits in is renamed away."""

    name = "review"

    @step(entry=True, effects=EffectClass.NONE)
    async def check(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return state


async def start_waiting_run(home: Path) -> tuple[str, str]:
    async with Runtime.open(home, workers=1) as rt:
        rt.workflows.register(ReviewV1)
        run = await rt.runs.wait((await rt.runs.start("review")).id, 10)
        assert run.status == "waiting"
        return run.id, run.plan_hash


async def test_a_run_resumed_after_its_workflow_changed_goes_on_with_the_new_plan_and_records_it(home: Path) -> None:
    run_id, old_hash = await start_waiting_run(home)
    async with Runtime.open(home, workers=1) as rt:
        plan = rt.workflows.register(ReviewV2)
        assert plan.plan_hash != old_hash
        waiting = await rt.runs.get(run_id)
        await rt.runs.resolve_interrupt(waiting.pending_interrupts[0].id, "approve", value="yes")
        done = await rt.runs.wait(run_id, 10)
        assert done.status == "succeeded" and done.state == {"answer": "yes", "by": "v2"}
        assert done.plan_hash == plan.plan_hash
        changes = [e.data for e in await rt.runs.events(run_id) if e.type == "run.plan_changed"]
        assert changes == [{"from": old_hash, "to": plan.plan_hash, "step": "ask"}]


async def test_a_run_whose_step_is_gone_from_the_new_definition_fails_and_says_why(home: Path) -> None:
    run_id, _ = await start_waiting_run(home)
    async with Runtime.open(home, workers=1) as rt:
        rt.workflows.register(ReviewRenamed)
        waiting = await rt.runs.get(run_id)
        await rt.runs.resolve_interrupt(waiting.pending_interrupts[0].id, "approve")
        done = await rt.runs.wait(run_id, 10)
        assert done.status == "failed"
        assert done.error == (
            "step 'ask' is not in workflow 'review' any more (steps: ['check']); "
            "the definition changed under a running run"
        )
