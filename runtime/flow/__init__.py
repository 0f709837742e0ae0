"""Composition: agents with tools, the Selector, the Compressor (workflow definitions live in ``workflow.py``).

This package namespace stays free of ``runtime.flow.workflow`` (the durable engine imports that
module on its own).
"""

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
