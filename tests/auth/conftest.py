"""Servers for the auth tests: rath-mcp's own HTTP apps behind the gate, on 127.0.0.1, in this process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

from mcp.server import MCPServer

from rath_mcp.auth.remote import Remote, remote_for
from rath_mcp.server import build_server
from rath_mcp.transports import MCP_PATH, SSE_PATH, sse_app, streamable_http_app
from runtime import Runtime
from tests.auth._local import served


@dataclass
class Served:
    base: str
    remote: Remote
    server: MCPServer
    rt: Runtime

    @property
    def mcp(self) -> str:
        return f"{self.base}{MCP_PATH}"

    @property
    def sse(self) -> str:
        return f"{self.base}{SSE_PATH}"


@asynccontextmanager
async def rath_http(
    rt: Runtime,
    transport: Literal["http", "sse"] = "http",
    *,
    auth: str = "token",
    issuer: str | None = None,
    audience: str | None = None,
    adjust: Callable[[Remote, MCPServer], None] | None = None,
) -> AsyncIterator[Served]:
    """``serve --transport TRANSPORT --auth AUTH`` as the CLI builds it, on a free port of 127.0.0.1."""
    remote = remote_for(rt, auth, issuer=issuer, audience=audience)
    server = build_server(rt, remote=remote)
    if adjust is not None:
        adjust(remote, server)
    if transport == "http":
        app = remote.gate(streamable_http_app(server, "127.0.0.1"), MCP_PATH)
    else:
        app = remote.gate(sse_app(server, "127.0.0.1"), SSE_PATH)
    async with served(app) as base:
        yield Served(base, remote, server, rt)
