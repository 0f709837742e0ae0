"""The viewer as an MCP App: a ``ui://`` resource served as ``text/html;profile=mcp-app``.

The SDK's :class:`mcp.server.apps.Apps` extension holds the resource and advertises
``io.modelcontextprotocol/ui`` in the server's capabilities. The tools that show a run or a
lineage are registered with the rest (``rath_mcp.tools``); :func:`link_tools` only adds
``_meta.ui.resourceUri`` to their definitions. Their results are not touched: a host without Apps
gets exactly the structured results it always got.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Final

from mcp.server import MCPServer
from mcp.server.apps import Apps, ResourceCsp

from rath_mcp import sdk

VIEWER_URI: Final = "ui://rath/viewer"
#: The tools whose results the viewer renders (CONTRACT §10).
LINKED_TOOLS: Final = ("run_get", "run_start", "run_wait", "session_lineage")


def viewer_html() -> str:
    """The built viewer (``web/`` → ``rath_mcp/apps/viewer.html``), read from the installed package."""
    return files("rath_mcp.apps").joinpath("viewer.html").read_text(encoding="utf-8")


def extension() -> Apps:
    """The MCP Apps extension carrying the viewer resource; pass it to ``MCPServer(extensions=…)``."""
    apps = Apps()
    apps.add_html_resource(
        VIEWER_URI,
        viewer_html(),
        name="rath-viewer",
        title="rath-mcp run viewer",
        description="A run's status, timeline, lineage graph and pending approvals, with buttons that answer them",
        # Everything is inlined and every call goes through the host: no origin is needed at all.
        csp=ResourceCsp(connect_domains=[], resource_domains=[]),
        prefers_border=True,
    )
    return apps


def link_tools(server: MCPServer) -> None:
    """Point the run and lineage tools at the viewer (``_meta.ui.resourceUri``); call after registering tools."""
    for name in LINKED_TOOLS:
        sdk.add_tool_meta(server, name, {"ui": {"resourceUri": VIEWER_URI}})
