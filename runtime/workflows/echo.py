"""``echo``: offline and deterministic. Replies with the user's own words, durably."""

from __future__ import annotations

from functools import partial
from typing import Any

from runtime.errors import InvalidInputError
from runtime.flow.workflow import EffectClass, StepContext, Workflow, step


async def user_text(ctx: StepContext) -> str:
    """``input.message``, else the content of the session's last user chunk."""
    message = ctx.input.get("message")
    if isinstance(message, str) and message:
        return message
    if ctx.session_id is not None:
        session = await ctx.runtime.sessions.get(ctx.session_id)
        for chunk in reversed(session.chunks):
            if chunk.kind == "user":
                return chunk.content
    raise InvalidInputError("echo needs input.message or a session with a user message; give one of them")


INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"message": {"type": "string"}}}


class Echo(Workflow):
    """Echo the input message (or the session's last user message) back as an assistant reply, in a new
    session snapshot. Offline and deterministic; useful to try runs, sessions and MCP clients."""

    name = "echo"
    input_schema = INPUT_SCHEMA

    @step(entry=True, effects=EffectClass.IDEMPOTENT)
    async def echo(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        text = await user_text(ctx)
        session_id = await ctx.effect("reply", partial(self._reply, ctx, text), EffectClass.IDEMPOTENT)
        ctx.set_output_session(session_id)
        return {**state, "reply": text}

    def result(self, state: dict[str, Any]) -> dict[str, Any]:
        return {"echoed": state.get("reply")}

    async def _reply(self, ctx: StepContext, text: str) -> str:
        sessions = ctx.runtime.sessions
        reply = {"kind": "assistant", "content": text}
        message = ctx.input.get("message")
        if ctx.session_id is None:
            base = (await sessions.create([{"kind": "user", "content": text}])).id
            chunks = [reply]
        else:
            base = ctx.session_id
            chunks = [{"kind": "user", "content": message}, reply] if message else [reply]
        info = await sessions.append(base, chunks, op="run", metadata={"run_id": ctx.run_id})
        return info.id
