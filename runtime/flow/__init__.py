"""Composition: agents with tools, the Selector, the Compressor (workflow definitions live in ``workflow.py``).

This package namespace stays free of ``runtime.flow.workflow`` (the durable engine imports that
module on its own), and its names are imported on first use (``runtime.lazy``): importing
``runtime.flow.workflow`` does not load the agent stack.
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_exports

if TYPE_CHECKING:
    from runtime.flow.agent import Agent, AgentResult, MemoryOptions
    from runtime.flow.compressor import Compressor, CompressResult
    from runtime.flow.mcp_tools import MCPServerError, MCPServerSpec, MCPToolServer, mcp_server_specs
    from runtime.flow.selector import Choice, Selection, Selector
    from runtime.flow.tools import (
        FlowToolCall,
        ToolExecutionError,
        ToolOutcome,
        run_tool_calls,
        sandbox_tools,
    )

_EXPORTS = {
    "Agent": "runtime.flow.agent",
    "AgentResult": "runtime.flow.agent",
    "Choice": "runtime.flow.selector",
    "CompressResult": "runtime.flow.compressor",
    "Compressor": "runtime.flow.compressor",
    "FlowToolCall": "runtime.flow.tools",
    "MCPServerError": "runtime.flow.mcp_tools",
    "MCPServerSpec": "runtime.flow.mcp_tools",
    "MCPToolServer": "runtime.flow.mcp_tools",
    "MemoryOptions": "runtime.flow.agent",
    "Selection": "runtime.flow.selector",
    "Selector": "runtime.flow.selector",
    "ToolExecutionError": "runtime.flow.tools",
    "ToolOutcome": "runtime.flow.tools",
    "mcp_server_specs": "runtime.flow.mcp_tools",
    "run_tool_calls": "runtime.flow.tools",
    "sandbox_tools": "runtime.flow.tools",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "Agent",
    "AgentResult",
    "Choice",
    "CompressResult",
    "Compressor",
    "FlowToolCall",
    "MCPServerError",
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
