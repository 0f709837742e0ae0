"""The one place that reaches past the MCP SDK's public surface (2.3), and why.

- ``MCPServer`` has no public way to serve ``resources/subscribe``/``unsubscribe`` or
  ``logging/setLevel``; its low-level ``Server`` does (``add_request_handler``). The SDK's own
  in-memory transport reaches it the same way.
- A request's ``ServerSession`` hides its ``Connection``; we need it for per-connection identity
  (subscriptions, sampling clients, log level) and for its ``exit_stack`` (forget them on close).
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.session import ServerSession


def connection_of(session: ServerSession) -> Connection:
    """The connection a request's session belongs to."""
    connection: Connection = session._connection
    return connection


def add_request_handler(server: MCPServer, method: str, params_type: type[Any], handler: Any) -> None:
    """Serve a protocol method ``MCPServer`` does not expose a decorator for."""
    lowlevel: Any = server._lowlevel_server
    lowlevel.add_request_handler(method, params_type, handler)
