"""The 2025-11-25 tasks utility: ``tasks/get``, ``tasks/result``, ``tasks/list``, ``tasks/cancel``.

``tasks/result`` blocks until the run is finished, as the spec asks. While it blocks and the run
waits on a person, each pending interrupt is asked of the client as an ``elicitation/create``
tied to the task (``io.modelcontextprotocol/related-task``); the answer is the interrupt's
decision and the wait goes on. Meanwhile the client gets progress notifications (on the
progress token of the ``tools/call`` that made the task, else of ``tasks/result``), each tied
to the task, carrying the run's status and its model's text as it is written.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    INVALID_PARAMS,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    ProgressNotification,
    ProgressNotificationParams,
)

from rath_mcp.agent_text import TextRelay
from rath_mcp.asking import answer_from, form_for, message_for
from rath_mcp.tasks.results import call_tool_result
from rath_mcp.tasks.view import TaskOrigin, handshake_task, origin_of, related, status_message
from runtime import ConflictError, Runtime
from runtime.durable.models import TERMINAL, Interrupt

logger = logging.getLogger(__name__)
LIST_PAGE = 50


async def get(rt: Runtime, run_id: str) -> dict[str, Any]:
    run = await rt.runs.get(run_id)
    return handshake_task(run, await origin_of(rt, run))


async def list_page(rt: Runtime, cursor: str | None) -> dict[str, Any]:
    """A page of tasks, newest first; the cursor is opaque to clients (it is the last run id of a page)."""
    if cursor is not None and (not cursor.startswith("run_") or not cursor[4:].isalnum()):
        raise MCPError(INVALID_PARAMS, f"invalid cursor {cursor!r}: pass back the nextCursor of a tasks/list result")
    runs, next_cursor = await rt.runs.list(cursor=cursor, limit=LIST_PAGE)
    tasks = [handshake_task(run, await origin_of(rt, run)) for run in runs]
    page: dict[str, Any] = {"tasks": tasks}
    if next_cursor is not None:
        page["nextCursor"] = next_cursor
    return page


async def cancel(rt: Runtime, run_id: str) -> dict[str, Any]:
    run = await rt.runs.get(run_id)
    if run.status in TERMINAL:
        state = handshake_task(run, TaskOrigin())["status"]
        raise MCPError(INVALID_PARAMS, f"Cannot cancel task: already in terminal status {state!r}")
    run = await rt.runs.cancel(run_id, "cancelled through tasks/cancel")
    return handshake_task(run, await origin_of(rt, run))


class _TaskProgress:
    """Progress notifications of one task, each tied to it, with values that only go up."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], run_id: str, token: str | int | None) -> None:
        self.ctx = ctx
        self.run_id = run_id
        self.token = token
        self.value = 0

    async def send(self, message: str) -> None:
        if self.token is None:
            return
        self.value += 1
        params = ProgressNotificationParams.model_validate(
            {"progressToken": self.token, "progress": self.value, "message": message, "_meta": related(self.run_id)}
        )
        await self.ctx.session.send_notification(
            ProgressNotification(params=params), related_request_id=self.ctx.request_id
        )


def _can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def _progress_token(ctx: ServerRequestContext[Any, Any], origin: TaskOrigin) -> str | int | None:
    if origin.progress_token is not None:
        return origin.progress_token
    meta: Any = (ctx.params or {}).get("_meta") or {}
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


async def result(rt: Runtime, ctx: ServerRequestContext[Any, Any], run_id: str) -> dict[str, Any]:
    """The tool's result once the run is finished; asks the client the run's questions meanwhile."""
    run = await rt.runs.get(run_id)
    origin = await origin_of(rt, run)
    progress = _TaskProgress(ctx, run_id, _progress_token(ctx, origin))
    relay = TextRelay(rt, run_id)
    asked: set[str] = set()
    async with rt.runs.watch(run_id) as changes:
        async for changed in changes:
            for piece in await relay.fresh(changed):
                await progress.send(piece)
            await progress.send(status_message(changed))
            fresh = [i for i in changed.pending_interrupts if i.id not in asked]
            if changed.status == "waiting" and fresh and _can_elicit(ctx):
                asked |= {i.id for i in fresh}
                await _ask(rt, ctx, run_id, fresh)
    final = await rt.runs.get(run_id)
    answer = await call_tool_result(rt, final, origin)
    return {**answer, "_meta": related(run_id)}


async def _ask(rt: Runtime, ctx: ServerRequestContext[Any, Any], run_id: str, interrupts: list[Interrupt]) -> None:
    """Ask each interrupt as an elicitation tied to the task; record the answers as decisions."""
    params = ctx.session.client_params
    name = params.client_info.name if params is not None else None
    actor = f"mcp-task:{name}" if name else "mcp-task"
    for interrupt in interrupts:
        form = {"message": message_for(interrupt), "requestedSchema": form_for(interrupt), "_meta": related(run_id)}
        request = ElicitRequest(params=ElicitRequestFormParams.model_validate(form))
        try:
            answer = await ctx.session.send_request(
                request, ElicitResult, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
            )
        except MCPError as exc:
            logger.info("client refused elicitation for %s of task %s: %s", interrupt.id, run_id, exc)
            return
        decision = answer_from(interrupt, answer)
        if decision is None:
            continue
        try:
            await rt.runs.resolve_interrupt(interrupt.id, decision.action, decision.value, decision.reason, actor=actor)
        except ConflictError:  # someone else decided it first: their decision stands
            continue
