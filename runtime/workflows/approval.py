"""``approval``: offline. Drafts a text, waits for a human's approval, then finishes approved or rejected.

The graph loops: answering ``respond`` (feedback) sends the run back to ``draft`` for a revision
and asks again; ``edit`` replaces the draft and approves it; ``reject`` ends it.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from runtime.flow.workflow import EffectClass, StepContext, Workflow, router, step

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "draft": {"type": "string"},
        "message": {"type": "string"},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0},
    },
}


class Approval(Workflow):
    """Draft a text (input.draft or input.message, else the session's last message), ask a human to
    approve it (approve / edit / reject / respond with feedback for a revision), then finish with
    state.outcome = approved or rejected. The run's session records each question and decision; on
    approval the final draft follows them. Its result: outcome (approved, edited or rejected), the
    final draft, and who decided and why."""

    name = "approval"
    input_schema = INPUT_SCHEMA

    @step(entry=True, effects=EffectClass.READ_ONLY, successors=["review"])
    async def draft(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        text = state.get("draft") or state.get("message")
        if not text and ctx.session_id is not None:
            last = (await ctx.runtime.sessions.get(ctx.session_id)).last
            text = last.content if last is not None else ""
        text = str(text or "(empty draft)")
        feedback = state.pop("feedback", None)
        if feedback:
            text = f"{text}\n\n[revised after feedback: {feedback}]"
        return {**state, "draft": text, "revision": int(state.get("revision", 0)) + 1}

    @step(effects=EffectClass.READ_ONLY, successors=["route"])
    async def review(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        decision = await ctx.interrupt(
            "approval",
            prompt=f"Approve this draft (revision {state['revision']})?\n\n{state['draft']}",
            schema={"type": "string", "description": "edit: the new draft; respond: feedback for a revision"},
            timeout_s=state.get("timeout_s"),
        )
        state = {**state, "decision": decision.model_dump()}
        if decision.action == "edit":
            state["draft"] = str(decision.value)
        if decision.action == "respond":
            state["feedback"] = str(decision.value)
        return state

    @router(successors=["publish", "reject", "draft"])
    async def route(self, state: dict[str, Any], ctx: StepContext) -> str:
        action = state["decision"]["action"]
        return {"approve": "publish", "edit": "publish", "reject": "reject"}.get(action, "draft")

    @step(effects=EffectClass.IDEMPOTENT)
    async def publish(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        chunk = {"kind": "assistant", "content": state["draft"]}
        session_id = await ctx.effect("publish", partial(_append, ctx, chunk), EffectClass.IDEMPOTENT)
        ctx.set_output_session(session_id)
        return {**state, "outcome": "approved"}

    @step(effects=EffectClass.NONE)
    async def reject(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "outcome": "rejected", "reason": state["decision"].get("reason")}

    def result(self, state: dict[str, Any]) -> dict[str, Any]:
        decision = state.get("decision") or {}
        outcome = state.get("outcome")
        if outcome == "approved" and decision.get("action") == "edit":
            outcome = "edited"
        return {
            "outcome": outcome,
            "draft": state.get("draft"),
            "decided_by": decision.get("actor"),
            "reason": decision.get("reason"),
            "revision": state.get("revision"),
        }


async def _append(ctx: StepContext, chunk: dict[str, Any]) -> str:
    """The draft after the run's session so far (its questions and decisions), else a new session."""
    sessions, meta = ctx.runtime.sessions, {"run_id": ctx.run_id}
    base = ctx.output_session_id or ctx.session_id
    if base is None:
        return (await sessions.create([chunk], metadata=meta)).id
    return (await sessions.append(base, [chunk], op="run", metadata=meta)).id
