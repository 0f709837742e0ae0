"""rath-mcp's MCP adapter: ``build_server(rt)`` turns an open ``runtime.Runtime`` into an MCP server.

Imported lazily (``runtime.lazy``) so that shell commands which never speak MCP do not pay for importing the SDK.
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_namespace

if TYPE_CHECKING:  # the public names, one import each: lazy_namespace reads them (see runtime.lazy)
    from rath_mcp.server import build_server as build_server

__getattr__, __dir__, __all__ = lazy_namespace(__name__, __file__)
