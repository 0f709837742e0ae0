"""One SERVER span per MCP request, named and attributed as OpenTelemetry's conventions for MCP say.

A server middleware, outermost, so every request of every transport and era passes it, refusals
included: ``tools/call session_fork``, ``resources/read``, ``initialize``… with ``mcp.method.name``,
``jsonrpc.request.id``, ``gen_ai.tool.name`` (and ``gen_ai.operation.name`` ``execute_tool``),
``gen_ai.prompt.name``, ``mcp.resource.uri``, ``mcp.protocol.version``, ``network.transport``
(``pipe`` for stdio, ``tcp`` for HTTP and SSE) and ``rath.mcp.era`` (``handshake`` or ``2026-07-28``).
A JSON-RPC error sets ``error.type`` to its code (and ``rpc.response.status_code``); an ``isError``
tool result sets ``tool_error``; either makes the status ERROR.

The parent is the caller's W3C trace context: ``traceparent``/``tracestate`` in the request's
``params._meta`` (SEP-414), else the HTTP request's ``traceparent`` header. Tool arguments and
results become attributes only when message contents may be captured (``Tracing.capture_content``).

The SDK ships its own OpenTelemetry middleware, writing to OpenTelemetry's global tracer provider;
it is taken out (``sdk.drop_sdk_tracing``) so a request has one span, ours, from the ``Tracing``
the CLI made, and none at all when tracing is off.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from rath_mcp import sdk
from runtime.telemetry import Span, Tracing

INVALID_PARAMS = "-32602"
_NAMED = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}


def install(server: MCPServer, tracing: Tracing) -> None:
    """Trace every request ``server`` serves with ``tracing`` (call it last: the span goes outermost)."""
    sdk.drop_sdk_tracing(server)
    if tracing.enabled:
        server.middleware.insert(0, RequestSpans(tracing))


def _carriers(ctx: ServerRequestContext[Any, Any]) -> list[Mapping[str, object]]:
    """Where the caller's trace context may be: ``_meta`` first (per message), then the HTTP headers."""
    found: list[Mapping[str, object]] = []
    meta = (ctx.params or {}).get("_meta")
    if isinstance(meta, Mapping):
        found.append(meta)
    headers = getattr(ctx.request, "headers", None)
    if headers is not None:
        found.append({key: value for key in ("traceparent", "tracestate") if (value := headers.get(key)) is not None})
    return found


def _attributes(ctx: ServerRequestContext[Any, Any]) -> tuple[str, dict[str, Any]]:
    """The span's name and its attributes, from what the request says (never its arguments' values)."""
    params = ctx.params or {}
    http = ctx.request is not None
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    attributes: dict[str, Any] = {
        "mcp.method.name": ctx.method,
        "jsonrpc.request.id": str(ctx.request_id),
        "network.transport": "tcp" if http else "pipe",
        "network.protocol.name": "http" if http else None,
        "mcp.protocol.version": ctx.protocol_version,
        "rath.mcp.era": "2026-07-28" if modern else "handshake",
    }
    session = getattr(ctx.request, "headers", {}).get("mcp-session-id") if http else None
    attributes["mcp.session.id"] = session
    target = params.get("name") if ctx.method in _NAMED else None
    if isinstance(target, str):
        attributes[_NAMED[ctx.method]] = target
    else:
        target = None
    if ctx.method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
    uri = params.get("uri")
    if isinstance(uri, str):
        attributes["mcp.resource.uri"] = uri
    return (f"{ctx.method} {target}" if target else ctx.method), attributes


def _tool_error(result: HandlerResult) -> bool:
    data = result.model_dump(by_alias=True) if isinstance(result, BaseModel) else result
    return isinstance(data, Mapping) and data.get("isError") is True


def _as_text(value: Any) -> str:
    data = value.model_dump(by_alias=True, exclude_none=True) if isinstance(value, BaseModel) else value
    return json.dumps(data, default=str, ensure_ascii=False)


class RequestSpans:
    """The middleware: a SERVER span around each request (notifications pass untraced)."""

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:
            return await call_next(ctx)
        name, attributes = _attributes(ctx)
        with self.tracing.span(name, kind="server", attributes=attributes, carriers=_carriers(ctx)) as span:
            if self.tracing.capture_content and ctx.method == "tools/call":
                span.set("gen_ai.tool.call.arguments", _as_text((ctx.params or {}).get("arguments") or {}))
            try:
                result = await call_next(ctx)
            except MCPError as exc:
                _failed(span, str(exc.error.code), exc.error.message)
                raise
            except ValidationError:
                _failed(span, INVALID_PARAMS, "Invalid request parameters")
                raise
            if ctx.method == "tools/call":
                if _tool_error(result):
                    span.fail("tool_error")
                if self.tracing.capture_content:
                    span.set("gen_ai.tool.call.result", _as_text(result))
            return result


def _failed(span: Span, code: str, message: str) -> None:
    span.set("rpc.response.status_code", code)
    span.fail(code, message)
