"""Making tasks: ``tools/call`` of ``run_start``/``delegate`` answered with a ``CreateTaskResult``.

One server middleware, for both eras:

- 2025-11-25: a call carrying a ``task`` field gets a task (the client asked); the handshake
  advertises ``capabilities.tasks`` and ``tools/list`` marks the two tools
  ``execution.taskSupport: "optional"``. A ``task`` on any other tool is Method not found.
- 2026-07-28: the server decides (SEP-2663). A call of the two tools from a client that declared
  ``io.modelcontextprotocol/tasks`` in the request's capabilities gets a task; others get the
  tool's own result, as before.

The call itself still goes through the tool (``wait_s`` set to 0): its argument checks, and every
middleware around it (grants, audit), apply to a task exactly as to a plain call. The run is in
the store when the tool returns; the task's own record (``task.created``: tool, ttl, progress
token) is noted with it before the ``CreateTaskResult`` is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from rath_mcp.tasks.view import CREATED_EVENT, TOOLS, TaskOrigin, extension_task, handshake_task
from runtime import Runtime

HANDSHAKE_VERSION: Final = "2025-11-25"
EXTENSION: Final = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES_META: Final = "io.modelcontextprotocol/clientCapabilities"
IMMEDIATE_RESPONSE_META: Final = "io.modelcontextprotocol/model-immediate-response"
SERVER_TASKS_CAPABILITY: Final[dict[str, Any]] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
#: Longest ttl (ms) recorded for a task (ten years): runs are kept for ever, this only bounds the number.
MAX_TTL_MS: Final = 10 * 365 * 24 * 3600 * 1000


def declares_extension(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this (2026-07-28) request declared the tasks extension in its capabilities."""
    capabilities = ctx.session.client_capabilities
    declared = capabilities.extensions if capabilities is not None else None
    if declared and EXTENSION in declared:
        return True
    meta: Any = (ctx.params or {}).get("_meta") or {}
    caps = meta.get(CLIENT_CAPABILITIES_META) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


def _requested_ttl(task: Any) -> int | None:
    ttl = task.get("ttl") if isinstance(task, dict) else None
    if ttl is None:
        return None
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        raise MCPError(INVALID_PARAMS, f"task.ttl must be a whole number of milliseconds, 0 or more (got {ttl!r})")
    return min(ttl, MAX_TTL_MS)


class TaskCreation:
    """The middleware that turns a tool call into a task, and the handshake additions that go with it."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:
            return await call_next(ctx)
        if ctx.method == "initialize":
            return self._advertise(await call_next(ctx))
        if ctx.method == "tools/list" and ctx.protocol_version == HANDSHAKE_VERSION:
            return self._mark_tools(await call_next(ctx))
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params: Mapping[str, Any] = ctx.params or {}
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            if params.get("name") in TOOLS and declares_extension(ctx):
                return await self._create(ctx, call_next, dict(params), modern=True)
            return await call_next(ctx)
        if ctx.protocol_version != HANDSHAKE_VERSION or "task" not in params:
            return await call_next(ctx)
        if params.get("name") not in TOOLS:
            raise MCPError(
                METHOD_NOT_FOUND,
                f"tool {params.get('name')!r} cannot run as a task (its execution.taskSupport is forbidden); "
                f"call it without 'task', or use one of {list(TOOLS)}",
            )
        return await self._create(ctx, call_next, dict(params), modern=False)

    async def _create(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, params: dict[str, Any], *, modern: bool
    ) -> HandlerResult:
        ttl = None if modern else _requested_ttl(params.pop("task"))
        params.pop("task", None)  # SEP-2663: a 'task' field is not an opt-in there
        arguments = params.get("arguments")
        params["arguments"] = {**(arguments if isinstance(arguments, dict) else {}), "wait_s": 0}
        result = await call_next(replace(ctx, params=params))
        outcome: dict[str, Any] = dict(result) if isinstance(result, dict) else {}
        structured = outcome.get("structuredContent")
        run_id = structured.get("run_id") if isinstance(structured, dict) else None
        if outcome.get("isError") or not isinstance(run_id, str):
            if modern:
                return result  # the server chose not to make a task: the tool's own answer stands
            content = outcome.get("content") or [{}]
            raise MCPError(INVALID_PARAMS, str(content[0].get("text") or "the tool refused the call"))
        origin = TaskOrigin(str(params["name"]), ttl)
        note: dict[str, Any] = {"tool": origin.tool, "ttl_ms": ttl, "era": ctx.protocol_version}
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if isinstance(token, str | int) and not isinstance(token, bool):
            note["progress_token"] = token
        await self.rt.runs.note(run_id, CREATED_EVENT, note)
        run = await self.rt.runs.get(run_id)
        if modern:
            return {"resultType": "task", **extension_task(run)}
        immediate = f"Started run {run_id} as a task; its result will follow when the run finishes."
        return {"task": handshake_task(run, origin), "_meta": {IMMEDIATE_RESPONSE_META: immediate}}

    @staticmethod
    def _advertise(result: HandlerResult) -> HandlerResult:
        """``capabilities.tasks`` in a 2025-11-25 handshake (later eras use the extension instead)."""
        if not isinstance(result, dict) or result.get("protocolVersion") != HANDSHAKE_VERSION:
            return result
        capabilities = dict(result.get("capabilities") or {})
        capabilities["tasks"] = SERVER_TASKS_CAPABILITY
        return {**result, "capabilities": capabilities}

    @staticmethod
    def _mark_tools(result: HandlerResult) -> HandlerResult:
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return result
        tools = [
            {**tool, "execution": {"taskSupport": "optional"}} if tool.get("name") in TOOLS else tool
            for tool in result["tools"]
        ]
        return {**result, "tools": tools}
