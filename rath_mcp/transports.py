"""Running one built server over stdio, Streamable HTTP (``/mcp``) or legacy SSE (``/sse``).

Everything human-readable goes to stderr: on stdio, stdout carries the protocol and nothing else.
HTTP servers bind 127.0.0.1 by default (DNS-rebinding protection is on for loopback hosts), and
report the address they actually bound (``--port 0`` picks a free port) on stderr.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import anyio
import uvicorn
from mcp.server import MCPServer
from starlette.types import ASGIApp

from rath_mcp.shell import note

Transport = Literal["stdio", "http", "sse"]
MCP_PATH = "/mcp"
SSE_PATH = "/sse"


async def serve(server: MCPServer, transport: Transport, *, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve until the client hangs up (stdio) or the process is asked to stop (HTTP, SSE)."""
    if transport == "stdio":
        await server.run_stdio_async()
    elif transport == "http":
        await _serve_asgi(server.streamable_http_app(host=host), host, port, "Streamable HTTP", MCP_PATH)
    elif transport == "sse":
        await _serve_asgi(server.sse_app(host=host), host, port, "SSE", SSE_PATH)
    else:  # argparse restricts the choice; this guards programmatic callers
        raise ValueError(f"unknown transport {transport!r}; use stdio, http or sse")


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
