"""``agent``: a tool-using agent on the session's sandbox, with memory (a shipped workflow).

The run's session (or a new one made from ``input.message``; a message given with a session is
appended to it) goes to an ``Agent`` with the built-in sandbox tools on the session's placement,
the tools of any MCP servers declared in ``config.json``, and memory recall. The provider is
``input.provider``, else the configured one (``RATH_PROVIDER`` or config.json), else the model of
the MCP client waiting on the run, if it offers sampling; with none of these the run fails saying
how to configure a provider (it never answers with a stand-in).

The agent runs journaled on the step's effect ledger (``journal=ctx.effect``): every model answer,
tool call and session append is an effect, so when the step runs again (after a crash or a retry)
what was done is replayed and the loop carries on from there. A command that was in flight when a
worker died is not run again blindly: it becomes ``ambiguous`` and the run waits for review.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from runtime.errors import InvalidInputError
from runtime.flow.workflow import EffectClass, StepContext, Workflow, step
from runtime.providers.config import PROVIDER_NAMES

if TYPE_CHECKING:  # the agent stack is imported by the steps that run it, not by every server start
    from runtime.flow.agent import AgentResult
    from runtime.flow.tools import FlowToolCall
    from runtime.providers.base import Provider
    from runtime.sessions.model import Session

DEFAULT_SYSTEM = (
    "You are a capable assistant working in a sandboxed workspace. Use the tools to read and write files "
    "and run commands when that helps; then answer the user plainly and briefly."
)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "the task (appended to the session when one is given)"},
        "system": {"type": "string", "description": "system prompt (default: a general sandbox assistant)"},
        "provider": {"type": "string", "enum": list(PROVIDER_NAMES)},
        "max_rounds": {"type": "integer", "minimum": 1, "maximum": 50},
        "token_budget": {"type": "integer", "minimum": 1},
        "memory": {"type": "boolean", "description": "recall memory before the turn (default true)"},
        "commit_memory": {"type": "boolean", "description": "commit the finished session to memory"},
        "tools": {"type": "boolean", "description": "give the agent the sandbox and MCP tools (default true)"},
    },
}


def _task_chunks(ctx: StepContext) -> list[dict[str, Any]]:
    """``input.message`` as chunks to add; an error when there is neither it nor a session."""
    message = ctx.input.get("message")
    chunks = [{"kind": "user", "content": message}] if isinstance(message, str) and message else []
    if ctx.session_id is None and not chunks:
        raise InvalidInputError("give the run a session_id or input.message (the task for the agent)")
    return chunks


def provider_for(ctx: StepContext) -> Provider:
    """The run's provider, checked (with the task) before anything is written: a run that cannot
    have a model fails without leaving a session behind."""
    _task_chunks(ctx)
    return ctx.runtime.providers.get(ctx.input.get("provider"))


async def input_session(ctx: StepContext) -> Session:
    """The session a run works on: the given one (plus ``input.message``), or a new one from the message."""
    sessions = ctx.runtime.sessions
    chunks = _task_chunks(ctx)
    if ctx.session_id is None:
        return await sessions.create(chunks, metadata={"run_id": ctx.run_id})
    if chunks:
        return await sessions.get((await sessions.append(ctx.session_id, chunks)).id)
    return await sessions.get(ctx.session_id)


async def journaled_input_session(ctx: StepContext) -> Session:
    """``input_session`` as an effect: a step run again works on the same session, not a second one."""

    async def prepare() -> str:
        return (await input_session(ctx)).id

    session_id: str = await ctx.effect("input_session", prepare, EffectClass.IDEMPOTENT)
    return await ctx.runtime.sessions.get(session_id)


async def workspace_tools(
    ctx: StepContext, session: Session, stack: AsyncExitStack, *, workflow: str | None = None
) -> list[FlowToolCall]:
    """Sandbox tools on the session's placement (under ``workflow``'s sandbox policy from config.json,
    if it has one) plus the tools of configured MCP servers (kept open by ``stack``)."""
    from runtime.flow.mcp_tools import MCPToolServer, mcp_server_specs
    from runtime.flow.tools import sandbox_tools

    rt = ctx.runtime

    async def keep_output(text: str, name: str) -> dict[str, Any]:
        """A command's whole output, too long to show the model, kept as an artifact of the run
        (the tool call is journaled itself: a step run again replays its result, this artifact with it)."""
        kept = await rt.artifacts.keep(
            text.encode("utf-8"), name=name, mime_type="text/plain", session_id=session.id, run_id=ctx.run_id
        )
        return kept.public()

    sandbox = await rt.sandboxes.get(session.placement, workflow=workflow)
    tools = sandbox_tools(sandbox, rt.secrets, keep_output)
    tools.append(save_artifact_tool(ctx, session, f"sandbox:{sandbox.backend}:{sandbox.workspace}"))
    for spec in mcp_server_specs(rt.home):
        server = await stack.enter_async_context(MCPToolServer(spec, tracing=rt.providers.tracing))
        tools += await server.tools()
    return tools


def save_artifact_tool(ctx: StepContext, session: Session, workspace_key: str) -> FlowToolCall:
    """``save_artifact``: the agent keeps a file of its workspace (one it was asked to produce) as an
    artifact of the run, beyond the sandbox's life; the file tools' path checks apply. It shares the
    workspace's resource key, so it runs after a write the model asked for before it."""
    from runtime.flow.tools import FlowToolCall

    async def save_artifact(path: str) -> dict[str, Any]:
        kept = await ctx.runtime.artifacts.save_from_session(session.id, path, run_id=ctx.run_id)
        return kept.public()

    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "a file of the workspace, e.g. 'out/report.md'"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    description = "Keep a workspace file (a report, a dataset you were asked to produce) as an artifact of this run."
    return FlowToolCall("save_artifact", description, parameters, save_artifact, workspace_key, "idempotent")


def result_state(result: AgentResult) -> dict[str, Any]:
    """An agent result as JSON for the effect ledger and the run state."""
    return {
        "output_session_id": result.session.id,
        "answer": result.answer,
        "truncated": result.truncated,
        "rounds": result.rounds,
        "stop": result.stop,
        "usage": result.usage.model_dump(),
    }


class AgentWorkflow(Workflow):
    """A tool-using agent on the session's sandbox, with memory recall. Give input.message (and/or a
    session); the answer is the last assistant chunk of the output session."""

    name = "agent"
    input_schema = INPUT_SCHEMA

    @step(entry=True, effects=EffectClass.NON_IDEMPOTENT)
    async def act(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        outcome = await self._run(ctx)
        ctx.set_output_session(outcome["output_session_id"])
        return {**state, **outcome}

    def result(self, state: dict[str, Any]) -> dict[str, Any]:
        return {key: state.get(key) for key in ("answer", "truncated", "stop")}

    async def _run(self, ctx: StepContext) -> dict[str, Any]:
        from runtime.flow.agent import Agent, MemoryOptions
        from runtime.flow.policy_gate import tool_gate

        inp = ctx.input
        provider = provider_for(ctx)
        session = await journaled_input_session(ctx)
        async with AsyncExitStack() as stack:
            tools = await workspace_tools(ctx, session, stack, workflow=self.name) if inp.get("tools", True) else []
            agent = Agent(
                str(inp.get("system") or DEFAULT_SYSTEM),
                provider,
                tools,
                memory=MemoryOptions(commit=bool(inp.get("commit_memory", False)))
                if inp.get("memory", True)
                else False,
                max_rounds=int(inp.get("max_rounds", 8)),
                token_budget=inp.get("token_budget"),
                on_delta=ctx.text,
            )
            gate = tool_gate(ctx, self.name)
            result = await agent.run(ctx.runtime, session.id, progress=ctx.progress, journal=ctx.effect, gate=gate)
        return result_state(result)


WORKFLOWS = [AgentWorkflow]
