"""A client waiting on an agent run sees the model's text in pieces as it is written, before the run ends.

The agent below answers through the scripted provider (which streams its reply word by word to
``on_delta``) and then parks the run on an approval, so ``run_wait`` comes back while the run is
still unfinished: by then every piece must have reached the client, one progress notification
each, in order. The step starts only once the client is watching (its first progress
notification opens the gate), so no piece is written before the wait began.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from rath_mcp.server import build_server
from runtime import EffectClass, Runtime, StepContext, Workflow, step
from runtime.flow import Agent
from runtime.providers.scripted import ScriptedProvider
from tests.mcp.conftest import ERAS, call

pytestmark = pytest.mark.anyio
REPLY = "Tasks let a long run answer later."


class Narrate(Workflow):
    """An agent speaks (streamed), then the run waits on a person."""

    name = "narrate"
    gate: anyio.Event

    @step(entry=True, effects=EffectClass.READ_ONLY, successors=["confirm"])
    async def speak(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        await Narrate.gate.wait()
        session = await ctx.runtime.sessions.create([{"kind": "user", "content": "say it"}])
        agent = Agent("be brief", ScriptedProvider([{"content": REPLY}]), on_delta=ctx.text)
        result = await agent.run(ctx.runtime, session.id, journal=ctx.effect)
        return {**state, "answer": result.answer}

    @step()
    async def confirm(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        await ctx.interrupt("approval", prompt="Keep it?")
        return state


@pytest.mark.parametrize("era", ERAS)
async def test_a_waiting_client_gets_the_agents_text_in_pieces_before_the_run_ends(rt: Runtime, era: str) -> None:
    Narrate.gate = anyio.Event()
    rt.workflows.register(Narrate)
    messages: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")
        Narrate.gate.set()  # the client is watching: the agent may speak

    async with Client(build_server(rt), mode=era) as client:
        started = await call(client, "run_start", workflow="narrate")
        with anyio.fail_after(30):
            result = await client.call_tool(
                "run_wait", {"run_id": started["run_id"], "timeout_s": 50}, progress_callback=progress
            )
    summary = result.structured_content
    assert summary is not None and summary["status"] == "waiting"  # the run has not ended
    pieces = [m for m in messages if not m.startswith(f"run {started['run_id']}")]
    assert len(pieces) > 1 and "".join(pieces) == REPLY  # in pieces, in order, all of it
    events = await rt.runs.events(started["run_id"], 0, 1000)
    assert "".join(e.data["text"] for e in events if e.type == "step.text") == REPLY
