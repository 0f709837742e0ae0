"""Durable runs as MCP Tasks, in both protocol eras (CONTRACT §9): ``install(server, rt)``.

The task id is the run id; a task's state is the run's, read from the store on every request, so
any server process on the store answers for any task, after a restart too. Each ``tasks/*``
method is served once and answers in the shape of the request's era: the 2025-11-25 utility
(``rath_mcp.tasks.handshake``) or the 2026-07-28 extension ``io.modelcontextprotocol/tasks``
(``rath_mcp.tasks.extension``). Tasks are made in ``rath_mcp.tasks.create``.

Every handler reaches runs through the same runtime services as the run tools (``rt.runs``), so
whatever scopes those scopes tasks too. Grants: ``tasks/get``, ``tasks/result``, ``tasks/list``
read (``run.read``); ``tasks/update`` decides interrupts; ``tasks/cancel`` is ``run.cancel``.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND, PaginatedRequestParams, RequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from rath_mcp.errors import protocol_errors
from rath_mcp.sdk import add_request_handler, lowlevel
from rath_mcp.tasks import extension, handshake
from rath_mcp.tasks.create import EXTENSION, TaskCreation
from runtime import Runtime

__all__ = ["install"]


class TaskParams(RequestParams):
    """``{taskId, requestState?}`` of ``tasks/get``, ``tasks/result`` and ``tasks/cancel``."""

    task_id: str
    request_state: str | None = None


class UpdateTaskParams(TaskParams):
    """``tasks/update``: responses to a task's input requests, keyed as they were asked."""

    input_responses: dict[str, Any] = Field(default_factory=dict)


def _modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _not_in_extension(method: str) -> MCPError:
    return MCPError(METHOD_NOT_FOUND, f"{method} is not part of {EXTENSION} (2026-07-28): poll with tasks/get")


def install(server: MCPServer, rt: Runtime) -> None:
    """Serve tasks on ``server``: the ``tools/call`` middleware and the ``tasks/*`` methods."""

    async def tasks_get(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        with protocol_errors():
            if _modern(ctx):
                extension.require_extension(ctx)
                return await extension.get(rt, params.task_id)
            return await handshake.get(rt, params.task_id)

    async def tasks_result(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        if _modern(ctx):
            raise _not_in_extension("tasks/result")
        with protocol_errors():
            return await handshake.result(rt, ctx, params.task_id)

    async def tasks_list(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams) -> dict[str, Any]:
        if _modern(ctx):
            raise _not_in_extension("tasks/list")
        with protocol_errors():
            return await handshake.list_page(rt, params.cursor)

    async def tasks_cancel(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        with protocol_errors():
            if _modern(ctx):
                extension.require_extension(ctx)
                await extension.cancel(rt, params.task_id)
                return {}
            return await handshake.cancel(rt, params.task_id)

    async def tasks_update(ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> dict[str, Any]:
        if not _modern(ctx):
            raise MCPError(METHOD_NOT_FOUND, "tasks/update is part of the 2026-07-28 tasks extension")
        extension.require_extension(ctx)
        with protocol_errors():
            await extension.update(rt, ctx, params.task_id, params.input_responses)
        return {}

    add_request_handler(server, "tasks/get", TaskParams, tasks_get)
    add_request_handler(server, "tasks/result", TaskParams, tasks_result)
    add_request_handler(server, "tasks/list", PaginatedRequestParams, tasks_list)
    add_request_handler(server, "tasks/cancel", TaskParams, tasks_cancel)
    add_request_handler(server, "tasks/update", UpdateTaskParams, tasks_update)
    lowlevel(server).extensions[EXTENSION] = {}
    server.middleware.append(TaskCreation(rt))
