"""Look at runs: the run viewer as an MCP App (``ui://rath/viewer``) and as the ``/ui`` web page.

One self-contained HTML file, ``viewer.html``, built from ``web/`` (npm packages, locked) and
shipped in this package, serves both: :mod:`rath_mcp.apps.resource` offers it to hosts that render
MCP Apps (extension ``io.modelcontextprotocol/ui``) and links it from the run and lineage tools;
:mod:`rath_mcp.apps.web` serves it to browsers on the HTTP transports.
"""

from __future__ import annotations

from rath_mcp.apps.resource import LINKED_TOOLS, VIEWER_URI, extension, link_tools, viewer_html
from rath_mcp.apps.web import add_routes

__all__ = ["LINKED_TOOLS", "VIEWER_URI", "add_routes", "extension", "link_tools", "viewer_html"]
