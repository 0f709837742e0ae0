"""Workflows for the MCP tests of results and forks (loaded into the server's runtime by those tests).

Each effect appends a line to the log file named by ``state["log"]``, so a test counts how often
each really happened.
"""

from __future__ import annotations

from typing import Any

from runtime import EffectClass, StepContext, Workflow, step
from runtime.errors import RunFailure
from tests.durable.flows import record


async def _noted(ctx: StepContext, base: str | None, text: str) -> str:
    """A snapshot of the run's session with one more assistant chunk (the step's visible work)."""
    chunk = {"kind": "assistant", "content": text}
    if base is None:
        return (await ctx.runtime.sessions.create([chunk])).id
    return (await ctx.runtime.sessions.append(base, [chunk], op="run")).id


class Pipeline(Workflow):
    """fetch → build → ship. build fails unless state.approved_by is set (a fork can patch it in)."""

    name = "pipeline"

    @step(entry=True, effects=EffectClass.IDEMPOTENT, successors=["build"])
    async def fetch(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        await ctx.effect("fetch", lambda: record(state["log"], "fetch"), EffectClass.IDEMPOTENT)
        base = ctx.output_session_id or ctx.session_id
        ctx.set_output_session(await ctx.effect("note", lambda: _noted(ctx, base, "fetched"), EffectClass.IDEMPOTENT))
        return {**state, "fetched": True}

    @step(effects=EffectClass.IDEMPOTENT, successors=["ship"])
    async def build(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        if not state.get("approved_by"):
            raise RunFailure("build needs state.approved_by", run_id=ctx.run_id, step=ctx.step)
        await ctx.effect("build", lambda: record(state["log"], f"build for {state['approved_by']}"), "idempotent")
        return {**state, "built": True}

    @step(effects=EffectClass.IDEMPOTENT)
    async def ship(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        await ctx.effect("ship", lambda: record(state["log"], "ship"), EffectClass.IDEMPOTENT)
        base = ctx.output_session_id or ctx.session_id
        ctx.set_output_session(await ctx.effect("note", lambda: _noted(ctx, base, "shipped"), EffectClass.IDEMPOTENT))
        return {**state, "shipped": True}

    def result(self, state: dict[str, Any]) -> dict[str, Any]:
        return {"shipped": state.get("shipped", False), "approved_by": state.get("approved_by")}


class Plain(Workflow):
    """One step and no result hook: its result is its final state."""

    name = "plain"

    @step(entry=True, effects=EffectClass.NONE)
    async def only(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "done": True}
