"""A custom workflow file: load it with ``rath-mcp serve --workflows examples/my_workflows.py``.

Every ``Workflow`` subclass defined here is registered. ``publish`` drafts a note, pauses on an
approval interrupt, then "publishes" it through the effect ledger, so the side effect happens once
even if the run is resumed or the process restarts. ``triage`` shows a ``@router`` choosing the
next step. Both are used by ``durable_approval.py`` (from Python) and ``mcp_client.py`` (over MCP).
"""

from __future__ import annotations

from typing import Any

from runtime import EffectClass, StepContext, Workflow, router, step


class Publish(Workflow):
    """Draft a note, ask a human, then publish it exactly once."""

    name = "publish"

    @step(entry=True, effects=EffectClass.READ_ONLY, successors=["publish"])
    async def draft(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "draft": f"Note: {state.get('topic', 'nothing')}"}

    @step(effects=EffectClass.NON_IDEMPOTENT)
    async def publish(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        decision = await ctx.interrupt("approval", prompt=f"Publish {state['draft']!r}?")
        if decision.action != "approve":
            return {**state, "published": False}
        receipt = await ctx.effect("post", lambda: {"posted": state["draft"]})
        return {**state, "published": True, "receipt": receipt}


TICKET: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


class Triage(Workflow):
    """Route a ticket: urgent ones are escalated, the rest are queued."""

    name = "triage"
    input_schema = TICKET

    @router(entry=True, successors=["escalate", "queue"])
    async def route(self, state: dict[str, Any], ctx: StepContext) -> str:
        return "escalate" if "urgent" in state["text"].lower() else "queue"

    @step(effects=EffectClass.NONE)
    async def escalate(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "routed_to": "on-call"}

    @step(effects=EffectClass.NONE)
    async def queue(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "routed_to": "backlog"}
