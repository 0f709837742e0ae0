"""rath-mcp's MCP adapter: ``build_server(rt)`` turns an open ``runtime.Runtime`` into an MCP server.

Imported lazily so that shell commands which never speak MCP do not pay for importing the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rath_mcp.server import build_server

__all__ = ["build_server"]


def __getattr__(name: str) -> Any:
    if name == "build_server":
        from rath_mcp.server import build_server

        return build_server
    raise AttributeError(f"module 'rath_mcp' has no attribute {name!r}")
