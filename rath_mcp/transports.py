"""Running one built server over stdio, Streamable HTTP (``/mcp``) or legacy SSE (``/sse``).

Everything human-readable goes to stderr: on stdio, stdout carries the protocol and nothing else.
HTTP servers bind 127.0.0.1 by default (DNS-rebinding protection is on for loopback hosts), and
report the address they actually bound (``--port 0`` picks a free port) on stderr.

Every transport answers every request, whatever is wrong with its frame: each frame is judged by
``rath_mcp.wire`` before the SDK parses it, and a bad one is answered at the edge (stdio:
``rath_mcp.stdio_pipes``; Streamable HTTP and SSE: ``rath_mcp.http_frames``). One limit,
``max_frame`` bytes (``rath-mcp serve --max-frame-bytes``), bounds a frame on every transport.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.sse import SseServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from rath_mcp import apps, sdk, stdio_pipes
from rath_mcp.apps.web import UI_PATH
from rath_mcp.http_frames import AnsweringStream, FrameGuard
from rath_mcp.shell import note
from rath_mcp.wire import MAX_FRAME_BYTES

Transport = Literal["stdio", "http", "sse"]
MCP_PATH = "/mcp"
SSE_PATH = "/sse"
MESSAGES_PATH = "/messages/"

#: Wraps an HTTP app with authentication, health and metrics (``rath_mcp.auth.remote.Remote.gate``),
#: given the app and its MCP path.
Gate = Callable[[ASGIApp, str], ASGIApp]


def _no_gate(app: ASGIApp, path: str) -> ASGIApp:
    return app


async def serve(
    server: MCPServer,
    transport: Transport,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    gate: Gate = _no_gate,
    max_frame: int = MAX_FRAME_BYTES,
) -> None:
    """Serve until the client hangs up (stdio) or the process is asked to stop (HTTP, SSE)."""
    if transport == "stdio":
        await serve_stdio(server, max_frame=max_frame)
    elif transport == "http":
        app = gate(streamable_http_app(server, host, max_frame=max_frame), MCP_PATH)
        await _serve_asgi(app, host, port, "Streamable HTTP", MCP_PATH)
    elif transport == "sse":
        await _serve_asgi(gate(sse_app(server, host, max_frame=max_frame), SSE_PATH), host, port, "SSE", SSE_PATH)
    else:  # argparse restricts the choice; this guards programmatic callers
        raise ValueError(f"unknown transport {transport!r}; use stdio, http or sse")


async def serve_stdio(server: MCPServer, *, max_frame: int = MAX_FRAME_BYTES) -> None:
    """``MCPServer.run_stdio_async`` on our stdio transport (``rath_mcp.stdio_pipes``): frames judged and
    bounded, pipes served on the event loop."""
    lowlevel = sdk.lowlevel(server)
    async with stdio_pipes.stdio_streams(max_frame) as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def streamable_http_app(server: MCPServer, host: str, *, max_frame: int = MAX_FRAME_BYTES) -> ASGIApp:
    """The SDK's Streamable HTTP app behind :class:`FrameGuard` (its lifespan runs the session manager)."""
    app = apps.add_routes(server.streamable_http_app(host=host, max_request_body_size=max_frame))
    app.add_middleware(FrameGuard, limit=max_frame, answer="http", path=MCP_PATH)
    return app


def sse_app(server: MCPServer, host: str, *, max_frame: int = MAX_FRAME_BYTES) -> ASGIApp:
    """``MCPServer.sse_app`` (no auth), each POSTed message screened and answered on its event stream."""
    security = None
    if host in ("127.0.0.1", "localhost", "::1"):  # DNS-rebinding protection, as the SDK sets it for loopback
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    sse = SseServerTransport(MESSAGES_PATH, security_settings=security, max_request_body_size=max_frame)
    routes = [
        Route(SSE_PATH, endpoint=_SSEConnection(server, sse), methods=["GET"]),
        Mount(MESSAGES_PATH, app=FrameGuard(sse.handle_post_message, limit=max_frame, answer="stream")),
        *sdk.custom_routes(server),  # what the Streamable HTTP app serves beside /mcp (/ui/artifacts/…)
    ]
    return apps.add_routes(Starlette(routes=routes))


class _SSEConnection:
    """The ASGI endpoint of ``GET /sse``: one MCP connection for as long as the event stream is open."""

    def __init__(self, server: MCPServer, sse: SseServerTransport) -> None:
        self.lowlevel = sdk.lowlevel(server)
        self.sse = sse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with self.sse.connect_sse(scope, receive, send) as (read_stream, write_stream):
            await self.lowlevel.run(
                AnsweringStream(read_stream, write_stream),
                write_stream,
                self.lowlevel.create_initialization_options(),
            )


class _Uvicorn(uvicorn.Server):
    """uvicorn without re-raising SIGINT/SIGTERM after its graceful shutdown.

    uvicorn re-raises the stop signal once it has stopped, which kills the process before the
    runtime around the server has closed (its workers and store). Here a stop signal ends
    ``serve`` normally, so every ``async with`` unwinds and the process exits 0.
    """

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        originals = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)


async def _serve_asgi(app: ASGIApp, host: str, port: int, label: str, path: str) -> None:
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    web = _Uvicorn(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(web.serve)
        while not web.started:
            if web.should_exit:  # failed to bind; uvicorn has logged why
                return
            await anyio.sleep(0.02)
        bound = port
        for srv in web.servers:
            for sock in srv.sockets:
                bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        note(f"serving MCP over {label} on http://{shown}:{bound}{path}")
        note(f"the run viewer, in a browser: http://{shown}:{bound}{UI_PATH}")
