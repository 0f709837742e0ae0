"""The MCP tools of CONTRACT §4, one module per runtime layer."""

from __future__ import annotations

from mcp.server import MCPServer

from rath_mcp.tools import artifacts, forks, memory, runs, schedules, sessions
from rath_mcp.waiting import RunWaiter
from runtime import Runtime


def register_all(server: MCPServer, rt: Runtime, waiter: RunWaiter) -> None:
    """Add every tool of the contract to ``server``."""
    sessions.register(server, rt)
    runs.register(server, rt, waiter)
    forks.register(server, rt, waiter)
    memory.register(server, rt)
    artifacts.register(server, rt)
    schedules.register(server, rt)
