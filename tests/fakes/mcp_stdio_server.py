"""A tiny stdio MCP server (built on the MCP SDK) for the mcp_tools tests: arithmetic, a failing tool,
its own pid, state, environment, a crash.

Run as ``python tests/fakes/mcp_stdio_server.py``. Nothing is printed to stdout but the protocol.
"""

from __future__ import annotations

import os

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("fake-tools", version="0.1.0")
_notes: list[str] = []


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason (an isError result)."""
    raise ToolError(f"refused: {reason}")


@server.tool()
def whoami() -> str:
    """The server's process id: the same across calls when one process serves them all."""
    return str(os.getpid())


@server.tool()
def remember(note: str) -> dict[str, object]:
    """Keep a note in this process and return all notes so far (state lives as long as the process)."""
    _notes.append(note)
    return {"notes": list(_notes)}


@server.tool()
def getenv(name: str) -> str:
    """The value of an environment variable in the server process ("" when unset)."""
    return os.environ.get(name, "")


@server.tool()
def crash() -> str:
    """Exit the server process at once, as a crashing server would."""
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
