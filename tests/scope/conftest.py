"""Callers of many scopes on one server: Streamable HTTP on 127.0.0.1 with a test-only principal.

HTTP authentication (tokens, OAuth) is not this suite's business: a tiny ASGI middleware here does
what it does at the end, leaving a ``Principal`` on ``request.state.rath_principal``, read from a
test header (``x-test-principal: TENANT/PROJECT/GRANT,GRANT``). Everything after that is the real
server: the real SDK client, the real Streamable HTTP app behind uvicorn, the real runtime.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from starlette.types import ASGIApp, Receive, Scope, Send

from rath_mcp.principal import STATE_KEY, Principal
from rath_mcp.server import build_server
from rath_mcp.transports import streamable_http_app
from runtime import Runtime

HEADER = "x-test-principal"


def header_of(principal: Principal) -> str:
    return f"{principal.tenant}/{principal.project}/{','.join(sorted(principal.grants))}"


def caller(tenant: str, project: str, *grants: str) -> Principal:
    return Principal(actor=f"test:{tenant}", tenant=tenant, project=project, grants=frozenset(grants), method="token")


class TestPrincipals:
    """Test-only stand-in for HTTP authentication: the header's principal onto the request state."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = dict(scope["headers"]).get(HEADER.encode())
            if raw is not None:
                tenant, project, grants = raw.decode().split("/")
                found = caller(tenant, project, *(g for g in grants.split(",") if g))
                scope.setdefault("state", {})[STATE_KEY] = found
        await self.app(scope, receive, send)


@asynccontextmanager
async def http_serving(rt: Runtime) -> AsyncIterator[str]:
    """``build_server(rt)`` over Streamable HTTP on a free port of 127.0.0.1; yields the ``/mcp`` URL."""
    app = TestPrincipals(streamable_http_app(build_server(rt), "127.0.0.1"))
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(web.serve)
        with anyio.fail_after(30):
            while not web.started:  # uvicorn offers no event for it
                assert not web.should_exit, "uvicorn could not start"
                await anyio.sleep(0.02)
        port = next(sock.getsockname()[1] for srv in web.servers for sock in srv.sockets)
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            web.should_exit = True


@asynccontextmanager
async def client_as(url: str, principal: Principal, era: str) -> AsyncIterator[Client]:
    """A real SDK client whose every HTTP request carries ``principal``."""
    http = create_mcp_http_client(headers={HEADER: header_of(principal)})
    async with http, Client(streamable_http_client(url, http_client=http), mode=era) as client:
        yield client
