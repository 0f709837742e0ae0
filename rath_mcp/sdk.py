"""The one place that reaches past the MCP SDK's public surface (2.3), and why.

- ``MCPServer`` has no public way to serve ``resources/subscribe``/``unsubscribe`` or
  ``logging/setLevel``; its low-level ``Server`` does (``add_request_handler``). The SDK's own
  in-memory transport reaches it the same way.
- A request's ``ServerSession`` hides its ``Connection``; we need it for per-connection identity
  (subscriptions, sampling clients, log level) and for its ``exit_stack`` (forget them on close).
- The stream protocols a transport hands the low-level server are not exported publicly; we wrap
  the read stream of SSE (``rath_mcp.http_frames``) and so need their names.
- ``MCPServer`` offers no way to validate tool arguments strictly: it reads JSON text sent for a
  non-string argument as the value it spells (the string ``"{}"`` becomes an object), validates in
  pydantic's lax mode (``"7"`` becomes 7, ``"true"`` becomes True) and accepts unknown argument
  names. Each registered tool's arguments are validated as sent instead (``strict_arguments``).
- Our stdio transport (``rath_mcp.stdio_pipes``) judges every frame before the SDK parses it and
  serves its pipes on the event loop, so it replaces ``stdio_server``: it claims fd 0 and fd 1 the
  way ``stdio_server`` claims them (``claim_stdin``, ``claim_stdout``) and makes the same
  context-carrying streams for the server (``context_streams``).
- The low-level ``Server`` puts the SDK's own OpenTelemetry middleware first in every server's chain,
  writing to OpenTelemetry's global tracer provider; ``rath_mcp.tracing`` replaces it with spans from
  the ``Tracing`` the CLI made (``drop_sdk_tracing``), known by its class name (its module is private).
- A tool's ``_meta`` can only be given when it is added; the MCP App links tools that are registered
  elsewhere to its ``ui://`` resource afterwards (``add_tool_meta``).
- A resource template's MIME type is fixed when it is added; an artifact's is its own, so the
  template of ``rath://artifacts/{artifact_id}`` serves the ``Resource`` its function returns as is
  (``own_mime_types``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.server.session import ServerSession
from mcp.shared._context_streams import ContextReceiveStream, ContextSendStream, create_context_streams
from mcp.shared._stream_protocols import ReadStream, WriteStream

__all__ = [
    "ReadStream",
    "WriteStream",
    "add_request_handler",
    "add_tool_meta",
    "claim_stdin",
    "claim_stdout",
    "connection_of",
    "context_streams",
    "drop_sdk_tracing",
    "lowlevel",
    "own_mime_types",
    "strict_arguments",
]


def connection_of(session: ServerSession) -> Connection:
    """The connection a request's session belongs to."""
    connection: Connection = session._connection
    return connection


def add_request_handler(server: MCPServer, method: str, params_type: type[Any], handler: Any) -> None:
    """Serve a protocol method ``MCPServer`` does not expose a decorator for."""
    lowlevel: Any = server._lowlevel_server
    lowlevel.add_request_handler(method, params_type, handler)


def drop_sdk_tracing(server: MCPServer) -> None:
    """Take the SDK's ``OpenTelemetryMiddleware`` out of ``server``'s middleware chain."""
    server.middleware[:] = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]


def custom_routes(server: MCPServer) -> list[Any]:
    """The routes added with ``server.custom_route``: its Streamable HTTP app serves them, our SSE app adds them."""
    return list(server._custom_starlette_routes)


def lowlevel(server: MCPServer) -> Any:
    """The low-level ``Server`` behind ``server`` (to run it over streams we wrap)."""
    return server._lowlevel_server


class StrictArguments(FuncMetadata):
    """A tool's arguments validated as sent: in pydantic's strict mode (``"7"`` is not an integer, ``1`` not a
    boolean), argument names it does not declare refused, and no string read as the JSON it spells."""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        model = self.arg_model.model_validate(arguments_to_validate, strict=True, extra="forbid")
        return model.model_dump_one_level()


def strict_arguments(server: MCPServer) -> dict[str, list[str]]:
    """Make every registered tool validate its arguments strictly (``StrictArguments``); return each tool's names.

    Each argument model's config says ``extra="forbid"`` (a stray argument fails validation naming
    it), and the published inputSchema gets ``additionalProperties: false`` (a test checks it is the
    model's own schema). The models are not rebuilt: a strict subclass of each cost ~4 ms of every
    cold start, so validation is given pydantic's per-call ``strict`` and ``extra`` instead.
    """
    accepted: dict[str, list[str]] = {}
    for tool in server._tool_manager.list_tools():
        meta = tool.fn_metadata
        model = meta.arg_model
        model.model_config["extra"] = "forbid"  # this model's own config (pydantic gives each class its own)
        model.model_config["strict"] = True
        tool.fn_metadata = StrictArguments(
            arg_model=model,
            output_schema=meta.output_schema,
            output_model=meta.output_model,
            wrap_output=meta.wrap_output,
        )
        tool.parameters = {**tool.parameters, "additionalProperties": False}
        accepted[tool.name] = [field.alias or name for name, field in model.model_fields.items()]
    return accepted


def add_tool_meta(server: MCPServer, name: str, meta: dict[str, Any]) -> None:
    """Merge ``meta`` into a registered tool's ``_meta`` (``MCPServer`` sets it only when a tool is added)."""
    tool = server._tool_manager.get_tool(name)
    if tool is None:
        raise ValueError(f"no tool named {name!r} is registered")
    tool.meta = {**(tool.meta or {}), **meta}


def context_streams() -> tuple[ContextSendStream[Any], ContextReceiveStream[Any]]:
    """An unbuffered stream pair that carries each sender's context along, as ``stdio_server`` makes them."""
    return create_context_streams(0)


def claim_stdin() -> tuple[BinaryIO, Callable[[], None] | None]:
    """fd 0 claimed as ``stdio_server`` claims it: the wire on a private duplicate, fd 0 itself reading the
    null device (a child process never eats the wire); returns the wire and what restores fd 0."""
    from mcp.server import stdio

    return stdio._claim_fd(0, sys.stdin, "rb", stdio._open_stdin_diversion)


def claim_stdout() -> tuple[BinaryIO, Callable[[], None] | None]:
    """fd 1 claimed as ``stdio_server`` claims it: the wire on a private duplicate, fd 1 itself pointed at
    stderr (stray output of handlers and children misses the wire); returns the wire and what restores fd 1."""
    from mcp.server import stdio

    return stdio._claim_fd(1, sys.stdout, "wb", stdio._open_stdout_diversion)


def own_mime_types(server: MCPServer, uri_template: str) -> None:
    """Let the template ``uri_template`` answer with the ``Resource`` (MIME type included) its function returns."""
    from mcp.server.mcpserver.resources import FunctionResource, Resource, ResourceTemplate

    class OwnMimeType(ResourceTemplate):
        async def create_resource(self, uri: str, params: dict[str, Any], context: Any) -> Any:
            made = await super().create_resource(uri, params, context)
            inner = made.fn() if isinstance(made, FunctionResource) else None
            return inner if isinstance(inner, Resource) else made

    templates: Any = server._resource_manager._templates
    templates[uri_template] = OwnMimeType.model_construct(**dict(templates[uri_template]))
