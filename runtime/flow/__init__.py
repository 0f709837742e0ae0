"""Composition: agents with tools, the Selector, the Compressor (workflow definitions live in ``workflow.py``).

This package namespace stays free of ``runtime.flow.workflow`` (the durable engine imports that
module on its own) and loads the MCP client adapter only on first use: the mcp SDK is slow to import.
"""

from typing import TYPE_CHECKING, Any

from runtime.flow.agent import Agent, AgentResult, MemoryOptions
from runtime.flow.compressor import Compressor, CompressResult
from runtime.flow.selector import Choice, Selection, Selector
from runtime.flow.tools import (
    FlowToolCall,
    ToolExecutionError,
    ToolOutcome,
    run_tool_calls,
    sandbox_tools,
)

if TYPE_CHECKING:
    from runtime.flow.mcp_tools import MCPServerSpec, MCPToolServer, mcp_server_specs


def __getattr__(name: str) -> Any:
    if name in ("MCPServerSpec", "MCPToolServer", "mcp_server_specs"):
        from runtime.flow import mcp_tools

        return getattr(mcp_tools, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Agent",
    "AgentResult",
    "Choice",
    "CompressResult",
    "Compressor",
    "FlowToolCall",
    "MCPServerSpec",
    "MCPToolServer",
    "MemoryOptions",
    "Selection",
    "Selector",
    "ToolExecutionError",
    "ToolOutcome",
    "mcp_server_specs",
    "run_tool_calls",
    "sandbox_tools",
]
