"""Compiling workflows: immutable plans with a definition hash, and clear compile errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import EffectClass, InvalidInputError, NotFoundError, Runtime, StepContext, Workflow, router, step
from runtime.durable import WorkflowRegistry, compile_workflow
from tests.durable import flows

State = dict[str, Any]


def test_a_plan_is_immutable_and_hashed() -> None:
    plan = compile_workflow(flows.Loop)
    assert plan.entry == "inc"
    assert plan.steps["check"].kind == "router"
    assert plan.steps["check"].successors == ("inc", "done")
    assert not plan.steps["done"].is_async
    with pytest.raises(TypeError):
        plan.steps["x"] = plan.steps["inc"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        plan.entry = "check"  # type: ignore[misc]
    assert compile_workflow(flows.Loop).plan_hash == plan.plan_hash
    assert len(plan.plan_hash) == 32


def test_the_hash_changes_when_a_step_changes() -> None:
    class A(Workflow):
        name = "same"

        @step(entry=True)
        async def go(self, state: State, ctx: StepContext) -> State:
            return state

    class B(Workflow):
        name = "same"

        @step(entry=True)
        async def go(self, state: State, ctx: StepContext) -> State:
            return {**state, "changed": True}

    assert compile_workflow(A).plan_hash != compile_workflow(B).plan_hash


def test_no_entry_is_a_clear_error() -> None:
    class NoEntry(Workflow):
        @step()
        async def go(self, state: State, ctx: StepContext) -> State:
            return state

    with pytest.raises(InvalidInputError, match=r"no entry step .*entry=True"):
        compile_workflow(NoEntry)


def test_an_unknown_successor_is_a_clear_error() -> None:
    class Typo(Workflow):
        @step(entry=True, successors=["nxt"])
        async def go(self, state: State, ctx: StepContext) -> State:
            return state

        @step()
        async def next(self, state: State, ctx: StepContext) -> State:
            return state

    with pytest.raises(InvalidInputError, match=r"unknown successor 'nxt'; known steps: \['go', 'next'\]"):
        compile_workflow(Typo)


def test_an_unreachable_step_is_a_clear_error() -> None:
    class Island(Workflow):
        @step(entry=True)
        async def go(self, state: State, ctx: StepContext) -> State:
            return state

        @step()
        async def lost(self, state: State, ctx: StepContext) -> State:
            return state

    with pytest.raises(InvalidInputError, match=r"\['lost'\] cannot be reached from entry 'go'"):
        compile_workflow(Island)


def test_a_retrying_non_idempotent_step_needs_an_idempotency_key() -> None:
    class Risky(Workflow):
        @step(entry=True, retry=2)
        async def pay(self, state: State, ctx: StepContext) -> State:
            return state

    with pytest.raises(InvalidInputError, match=r"non-idempotent and retries .* idempotency_key"):
        compile_workflow(Risky)

    class Safe(Workflow):
        @step(entry=True, retry=2, idempotency_key="pay:{run_id}")
        async def pay(self, state: State, ctx: StepContext) -> State:
            return state

    assert compile_workflow(Safe).steps["pay"].retry.max_attempts == 3

    class BadTemplate(Workflow):
        @step(entry=True, retry=2, idempotency_key="pay:{order}")
        async def pay(self, state: State, ctx: StepContext) -> State:
            return state

    with pytest.raises(InvalidInputError, match=r"not a valid template .* \{run_id\}, \{step\} and \{visit\}"):
        compile_workflow(BadTemplate)


def test_a_plain_step_with_two_successors_must_be_a_router() -> None:
    class Fork(Workflow):
        @step(entry=True, successors=["a", "b"], effects=EffectClass.NONE)
        async def go(self, state: State, ctx: StepContext) -> State:
            return state

        @step(effects=EffectClass.NONE)
        async def a(self, state: State, ctx: StepContext) -> State:
            return state

        @step(effects=EffectClass.NONE)
        async def b(self, state: State, ctx: StepContext) -> State:
            return state

    with pytest.raises(InvalidInputError, match="add a @router"):
        compile_workflow(Fork)


def test_a_workflow_without_steps_or_forward_is_refused() -> None:
    class Empty(Workflow):
        pass

    with pytest.raises(InvalidInputError, match="no steps"):
        compile_workflow(Empty)


def test_forward_workflows_compile_to_one_step_and_init_needs_no_super() -> None:
    class Custom(flows.Shout):
        def __init__(self) -> None:  # no super().__init__(): fine here (OpenRath 2.0.0 crashes)
            self.greeting = "hi"

    plan = compile_workflow(Custom)
    assert list(plan.steps) == ["forward"] and plan.entry == "forward"


def test_names_default_to_snake_case_and_docstrings_describe() -> None:
    plan = compile_workflow(flows.SyncCharge)
    assert plan.name == "sync_charge"
    assert plan.description.startswith("A sync step")

    @router(successors=["x"])
    async def free(self: Any, state: State, ctx: StepContext) -> str:
        return "x"

    assert free.__name__ == "free"


def test_the_registry_describes_loads_and_lists_known_names(tmp_path: Path) -> None:
    registry = WorkflowRegistry()
    names = "ledger questions loop flaky slow_flaky sync_charge sleepy sleepy_with_timeout async_sleepy shout ten_steps"
    names += " sync_asks timed_effect limited per_user one_asking"
    assert registry.load("tests.durable.flows") == sorted(names.split())
    with pytest.raises(NotFoundError, match=r"no workflow named 'nope'; known workflows: \['async_sleepy'"):
        registry.get("nope")
    loop = next(d for d in registry.describe() if d["name"] == "loop")
    assert loop["steps"][1] == {
        "name": "check",
        "kind": "router",
        "entry": False,
        "successors": ["inc", "done"],
        "effects": "read_only",
        "retry": {"max_attempts": 1, "backoff_s": 0.5, "multiplier": 2.0, "max_backoff_s": 30.0},
        "timeout_s": None,
    }
    file = tmp_path / "my_flows.py"
    file.write_text(
        "from runtime import Workflow, step\n"
        "class Hello(Workflow):\n"
        "    '''Say hello.'''\n"
        "    @step(entry=True)\n"
        "    async def hi(self, state, ctx):\n"
        "        return {**state, 'hello': True}\n"
    )
    assert registry.load(str(file)) == ["hello"]
    assert registry.get("hello").description == "Say hello."
    with pytest.raises(NotFoundError, match="does not exist"):
        registry.load(str(tmp_path / "missing.py"))


@pytest.mark.anyio
async def test_the_runtime_ships_echo_and_approval(rt: Runtime) -> None:
    assert {"echo", "approval"} <= set(rt.workflows.names())
    approval = rt.workflows.get("approval").describe()
    assert [s["name"] for s in approval["steps"]] == ["draft", "review", "route", "publish", "reject"]
