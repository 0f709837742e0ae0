"""A journaled agent replays what it did: with an in-memory journal, and through the durable effect ledger
across a human interrupt raised by one of its tools."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from runtime import Runtime
from runtime.flow.agent import Agent
from runtime.flow.tools import FlowToolCall
from runtime.flow.workflow import StepContext, Workflow, step
from runtime.providers import ScriptedProvider

pytestmark = pytest.mark.anyio
TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


class MemoryJournal:
    """A real journal kept in a dict: a key that completed is replayed (through JSON, like the ledger)."""

    def __init__(self) -> None:
        self.done: dict[str, str] = {}
        self.classes: dict[str, str] = {}

    async def __call__(self, key: str, fn: Callable[[], Awaitable[Any]], effect_class: str, /) -> Any:
        if key not in self.done:
            self.done[key] = json.dumps(await fn())
            self.classes[key] = effect_class
        return json.loads(self.done[key])


async def test_a_second_run_on_the_same_journal_replays_without_model_or_tools(rt: Runtime) -> None:
    executed: list[str] = []

    async def note(text: str) -> str:
        executed.append(text)
        return f"noted {text}"

    tools = [FlowToolCall("note", "note it", TEXT, note)]
    script = [{"tool_calls": [{"name": "note", "arguments": {"text": "a"}}]}, {"content": "done"}]
    start = await rt.sessions.create([{"kind": "user", "content": "note a"}])
    journal = MemoryJournal()
    first = await Agent("sys", ScriptedProvider(script), tools).run(rt, start.id, journal=journal)
    again = await Agent("sys", ScriptedProvider([]), tools).run(rt, start.id, journal=journal)  # no replies left

    assert executed == ["a"]
    assert again.session.id == first.session.id and again.answer == first.answer == "done"
    assert again.usage == first.usage
    assert journal.classes == {
        "agent.1.model": "idempotent",
        "agent.1.tool.0": "non_idempotent",
        "agent.1.append": "idempotent",
        "agent.2.model": "idempotent",
        "agent.2.append": "idempotent",
    }


NOTES: list[str] = []


class GuardedNotes(Workflow):
    """An agent whose 'deploy' tool asks a human first (a test workflow)."""

    name = "guarded_notes"

    @step(entry=True)
    async def act(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        async def note(text: str) -> str:
            NOTES.append(text)
            return f"noted {text}"

        async def deploy(text: str) -> str:
            decision = await ctx.interrupt("approval", prompt=f"Deploy {text}?")
            return f"deploy {text}: {decision.action}"

        tools = [FlowToolCall("note", "note it", TEXT, note), FlowToolCall("deploy", "deploy it", TEXT, deploy)]
        agent = Agent("sys", ctx.runtime.providers.get(), tools)
        result = await agent.run(ctx.runtime, ctx.session_id or "", journal=ctx.effect)
        ctx.set_output_session(result.session.id)
        return {"answer": result.answer}


async def test_a_tool_that_interrupts_resumes_without_redoing_earlier_work(rt: Runtime) -> None:
    NOTES.clear()
    provider = ScriptedProvider(
        [
            {"tool_calls": [{"name": "note", "arguments": {"text": "before"}}]},
            {"tool_calls": [{"name": "deploy", "arguments": {"text": "v2"}}]},
            {"content": "v2 deployed after approval"},
        ]
    )
    rt.providers.register("default", provider)
    rt.workflows.register(GuardedNotes)
    start = await rt.sessions.create([{"kind": "user", "content": "note, then deploy v2"}])
    run = await rt.runs.wait((await rt.runs.start("guarded_notes", session_id=start.id)).id, 20)
    assert run.status == "waiting", run.error
    (pending,) = run.pending_interrupts
    assert pending.prompt == "Deploy v2?" and NOTES == ["before"] and provider.calls == 2

    await rt.runs.resolve_interrupt(pending.id, "approve", actor="ops")
    run = await rt.runs.wait(run.id, 20)

    assert run.status == "succeeded", run.error
    assert run.state["answer"] == "v2 deployed after approval"
    assert NOTES == ["before"]  # the note before the interrupt was replayed from the ledger, not rerun
    assert provider.calls == 3  # the model was not asked again for the rounds already answered
    out = await rt.sessions.get(run.output_session_id or "")
    assert [c.content for c in out.chunks if c.kind == "tool_result"] == ["noted before", "deploy v2: approve"]
    assert [c.kind for c in out.chunks].count("assistant") == 3
