"""Fixtures for the MCP contract tests: the real server, driven by the real SDK client in memory.

``client`` runs every test in both protocol eras: the handshake era (``legacy``, JSON-RPC over
in-memory streams with an initialize handshake) and 2026-07-28 (no handshake, direct dispatch).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp_types import CallToolResult

from rath_mcp.server import build_server
from runtime import Runtime

ERAS = ["legacy", "2026-07-28"]


@pytest.fixture
def server(rt: Runtime) -> MCPServer:
    return build_server(rt)


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def client(server: MCPServer, era: str) -> AsyncIterator[Client]:
    async with Client(server, mode=era) as c:
        yield c


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail with an isError result; return its text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    return text_of(result)


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)
