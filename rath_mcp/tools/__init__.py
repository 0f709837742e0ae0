"""The MCP tools of CONTRACT §4, one module per runtime layer."""

from __future__ import annotations

from mcp.server import MCPServer

from rath_mcp.tools import memory, sessions
from runtime import Runtime


def register_all(server: MCPServer, rt: Runtime) -> None:
    """Add every tool the runtime supports to ``server``."""
    sessions.register(server, rt)
    memory.register(server, rt)
