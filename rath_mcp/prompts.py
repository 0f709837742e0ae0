"""Prompts (``delegate_task``, ``review_run``) and argument completion for prompts and templates.

Prompts are ready-made instructions a host can offer its user; completion fills in workflow
names and run/session ids as the user types.
"""

from __future__ import annotations

import json

from mcp.server import MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp_types import Completion, CompletionArgument, CompletionContext, PromptReference, ResourceTemplateReference

from rath_mcp.errors import translate_prompt
from runtime import Runtime
from runtime.ids import MAX_ID_PREFIX

MAX_COMPLETIONS = 100


def register_prompts(server: MCPServer, rt: Runtime) -> None:
    @server.prompt(title="Delegate a task to a durable workflow")
    @translate_prompt
    async def delegate_task(task: str, workflow: str = "agent") -> list[UserMessage]:
        """Hand a task to a rath-mcp workflow and see it through to its answer."""
        rt.workflows.get(workflow)  # an unknown name fails here, listing the known ones
        text = (
            f"Use the rath-mcp `delegate` tool with workflow={workflow!r} for this task:\n\n{task}\n\n"
            "If the result has no answer yet, call `run_wait` with its run_id until the run finishes. "
            "If the run waits on a human, show me the pending interrupt's prompt and record my decision "
            "with `interrupt_resolve`. When it finishes, give me the answer and the output session id."
        )
        return [UserMessage(text)]

    @server.prompt(title="Review a durable run")
    @translate_prompt
    async def review_run(run_id: str) -> list[UserMessage]:
        """Review what a run did so far and decide what it is waiting on."""
        run = await rt.runs.get(run_id)
        events = await rt.runs.events(run_id, 0, 50)
        lines = [f"- #{e.seq} {e.type} {json.dumps(e.data, ensure_ascii=False)[:200]}" for e in events]
        text = (
            f"Review rath-mcp run {run_id} (workflow {run.workflow}).\n\n"
            f"Summary:\n```json\n{json.dumps(run.summary(), indent=2, ensure_ascii=False)}\n```\n\n"
            "Events (oldest first):\n" + ("\n".join(lines) or "(none)") + "\n\n"
            "Explain what happened and whether anything went wrong. "
            + (
                "It is waiting on a human: for each pending interrupt, recommend approve, edit or reject "
                "and, once I agree, record it with `interrupt_resolve`."
                if run.pending_interrupts
                else "If it needs review, look at `effect_list` and suggest how to settle each effect."
            )
        )
        return [UserMessage(text)]


def register_completions(server: MCPServer, rt: Runtime) -> None:
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        matches = await candidates(rt, argument.name, argument.value)
        if matches is None:
            return None
        more = len(matches) > MAX_COMPLETIONS
        return Completion(values=matches[:MAX_COMPLETIONS], total=None if more else len(matches), has_more=more)

    server.completion()(complete)  # type: ignore[no-untyped-call]  # the SDK's decorator is unannotated


async def candidates(rt: Runtime, name: str, prefix: str) -> list[str] | None:
    """Up to ``MAX_COMPLETIONS + 1`` values of an argument that start with ``prefix`` (ids newest
    first), found by a range scan on the id, however many there are; None for arguments we do not complete."""
    if name in ("workflow", "name"):
        return [n for n in rt.workflows.names() if n.startswith(prefix)]
    if len(prefix) > MAX_ID_PREFIX:  # no id is that long: nothing to offer (the runtime would refuse it)
        return []
    if name == "run_id":
        return await rt.runs.ids(prefix, MAX_COMPLETIONS + 1)
    if name == "session_id":
        return await rt.sessions.ids(prefix, MAX_COMPLETIONS + 1)
    if name == "memory_id":
        return await rt.memory.ids(prefix, MAX_COMPLETIONS + 1)
    return None
