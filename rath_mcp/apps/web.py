"""``GET /ui``: the run viewer in a browser, on the HTTP transports.

The page is the same ``viewer.html`` as the MCP App; in a top-level window it routes on its own
path (``/ui``: runs with status/workflow filters, ``/ui/runs/{run_id}``, ``/ui/sessions/{id}``)
and calls tools on this server's ``/mcp`` endpoint (Streamable HTTP, JSON-RPC from the page),
sending the bearer token it was given (``/ui#token=…``, or typed in when ``/mcp`` answers 401).

The routes are added to the same Starlette app as ``/mcp`` (or ``/sse``), so whatever middleware
wraps that app wraps them too. The page itself holds no data: every run, event and session it
shows comes through ``/mcp`` and its checks.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from rath_mcp.apps.resource import viewer_html

UI_PATH = "/ui"
#: The page inlines its script and style and talks only to its own origin.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'unsafe-inline'",
        "style-src 'unsafe-inline'",
        "img-src data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class ViewerPage:
    """What every ``/ui`` path answers: the viewer HTML, read once when the app is built."""

    def __init__(self) -> None:
        self.html = viewer_html()

    async def respond(self, request: Request) -> Response:
        return HTMLResponse(self.html, headers=HEADERS)


def routes() -> list[BaseRoute]:
    page = ViewerPage().respond
    return [
        Route(UI_PATH, endpoint=page, methods=["GET", "HEAD"]),
        Route(f"{UI_PATH}/", endpoint=page, methods=["GET", "HEAD"]),
        Route(f"{UI_PATH}/runs/{{run_id}}", endpoint=page, methods=["GET", "HEAD"]),
        Route(f"{UI_PATH}/sessions/{{session_id}}", endpoint=page, methods=["GET", "HEAD"]),
    ]


def add_routes(app: Starlette) -> Starlette:
    """Serve the viewer at ``/ui`` from ``app`` (the Streamable HTTP or SSE app); returns ``app``."""
    app.router.routes.extend(routes())
    return app
