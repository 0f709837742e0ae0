"""The 2026-07-28 extension ``io.modelcontextprotocol/tasks`` (SEP-2663): get, update, cancel.

- ``tasks/get``: the task as it is now. An ``input_required`` task carries its ``inputRequests``:
  one ``elicitation/create`` per pending interrupt, keyed by the interrupt id (unique for the
  task's whole life, as the spec asks); a completed one carries the tool's ``result``; a failed
  one a JSON-RPC ``error``.
- ``tasks/update``: ``inputResponses`` keyed by interrupt id decide those interrupts; keys that
  are not pending are ignored. Always acknowledged (eventually consistent, as the spec says).
- ``tasks/cancel``: cancels the run as ``run_cancel`` does; always acknowledged.

A request whose capabilities do not declare the extension gets ``-32021`` (missing required
client capability, with ``requiredCapabilities``), as SEP-2133 names for extensions.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    ClientCapabilities,
    ElicitResult,
    MissingRequiredClientCapabilityErrorData,
)
from pydantic import ValidationError

from rath_mcp.asking import answer_from, request_for
from rath_mcp.tasks.create import EXTENSION, declares_extension
from rath_mcp.tasks.results import call_tool_result
from rath_mcp.tasks.view import extension_task, origin_of, status_message
from runtime import Runtime, UsageError

logger = logging.getLogger(__name__)


def require_extension(ctx: ServerRequestContext[Any, Any]) -> None:
    """Refuse a tasks request from a client that did not declare the extension on it."""
    if declares_extension(ctx):
        return
    data = MissingRequiredClientCapabilityErrorData(
        required_capabilities=ClientCapabilities(extensions={EXTENSION: {}})
    )
    raise MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"tasks/* needs the {EXTENSION} extension: declare it in the request's client capabilities",
        data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
    )


async def get(rt: Runtime, run_id: str) -> dict[str, Any]:
    run = await rt.runs.get(run_id)
    task = extension_task(run)
    if task["status"] == "input_required":
        task["inputRequests"] = {
            i.id: request_for(i).model_dump(by_alias=True, mode="json", exclude_none=True)
            for i in run.pending_interrupts
        }
    elif task["status"] == "completed":
        task["result"] = await call_tool_result(rt, run, await origin_of(rt, run))
    elif task["status"] == "failed":
        task["error"] = {"code": INTERNAL_ERROR, "message": status_message(run)}
    return task


async def update(rt: Runtime, ctx: ServerRequestContext[Any, Any], run_id: str, responses: dict[str, Any]) -> None:
    """Decide the pending interrupts the responses answer; anything else is ignored."""
    try:
        run = await rt.runs.get(run_id)
    except UsageError:
        return  # acknowledged all the same: the spec makes update an ack for any task id
    pending = {i.id: i for i in run.pending_interrupts}
    params = ctx.session.client_params
    name = params.client_info.name if params is not None else None
    actor = f"mcp-task:{name}" if name else "mcp-task"
    for key, raw in responses.items():
        interrupt = pending.get(key)
        if interrupt is None:
            continue
        try:
            answer = answer_from(interrupt, ElicitResult.model_validate(raw, by_name=False))
        except ValidationError:
            logger.info("ignored a malformed input response %r for task %s", key, run_id)
            continue
        if answer is None:
            continue
        try:
            await rt.runs.resolve_interrupt(key, answer.action, answer.value, answer.reason, actor=actor)
        except UsageError as exc:  # decided meanwhile (that decision stands), or a value its schema refuses
            logger.info("input response %r for task %s not applied: %s", key, run_id, exc)


async def cancel(rt: Runtime, run_id: str) -> None:
    try:
        await rt.runs.cancel(run_id, "cancelled through tasks/cancel")
    except UsageError:
        return  # an ack for any task id, as the spec asks
