"""The published inputSchema of every tool is exactly the schema of the strict model that validates it.

``sdk.strict_arguments`` gives each tool's argument model ``extra="forbid"`` and ``strict`` and publishes
the SDK's schema with ``additionalProperties: false`` added, instead of regenerating it from the
strict model (which cost ~20 ms of every cold start). This checks the shortcut says the same.
"""

from __future__ import annotations

import pytest
from mcp.server import MCPServer

pytestmark = pytest.mark.anyio


async def test_each_published_input_schema_is_its_strict_argument_model_s_schema(server: MCPServer) -> None:
    tools = server._tool_manager.list_tools()
    assert tools
    for tool in tools:
        strict = tool.fn_metadata.arg_model
        assert strict.model_config.get("extra") == "forbid", tool.name
        assert strict.model_config.get("strict") is True, tool.name
        assert tool.parameters == strict.model_json_schema(by_alias=True), tool.name
