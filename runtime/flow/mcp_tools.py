"""Stdio MCP servers adapted as ``FlowToolCall`` tools.

``MCPToolServer`` starts the server process once and keeps one MCP client session to it for as long
as the ``async with`` block lasts: every tool call goes over that one connection (no process per
call), so a server that keeps state between calls behaves as it would under any MCP host. A result
with ``isError`` stays an error: it becomes a typed ``execution_error`` tool result, never a
success. Servers can be declared in ``$RATH_HOME/config.json``::

    {"mcp_servers": {"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                               "env": {}, "tool_prefix": "files_"}}}
"""

from __future__ import annotations

import json
import re
import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import mcp_types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from runtime.errors import InvalidInputError
from runtime.flow.tools import FlowToolCall, ToolExecutionError
from runtime.providers.config import read_config

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_LISTED_PAGES = 50


@dataclass(frozen=True)
class MCPServerSpec:
    """How to start one stdio MCP server, and how its tools are presented to a model."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    tool_prefix: str = ""
    resource_key: str | None = None  # None: calls may run in parallel; a key serialises them
    call_timeout_s: float = 60.0


def _text(result: mcp_types.CallToolResult) -> str:
    """A tool result as text: text blocks joined; other blocks described; structured content as JSON."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource {block.uri}]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[binary resource {resource.uri}]")
        else:
            parts.append(f"[{block.type} content, {getattr(block, 'mime_type', 'unknown type')}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


class MCPToolServer:
    """One long-lived client connection to a stdio MCP server; ``tools()`` lists its tools as FlowToolCalls."""

    def __init__(self, spec: MCPServerSpec, *, errlog: TextIO | None = None) -> None:
        self.spec = spec
        self._errlog = errlog if errlog is not None else (sys.__stderr__ or sys.stderr)
        self._stack: AsyncExitStack | None = None
        self._client: Client | None = None
        self.calls = 0

    def __repr__(self) -> str:
        return f"MCPToolServer(name={self.spec.name!r}, command={self.spec.command!r})"  # env may hold secrets

    async def __aenter__(self) -> MCPToolServer:
        params = StdioServerParameters(
            command=self.spec.command, args=list(self.spec.args), env=dict(self.spec.env) or None, cwd=self.spec.cwd
        )
        async with AsyncExitStack() as stack:
            try:
                self._client = await stack.enter_async_context(
                    Client(stdio_client(params, errlog=self._errlog), read_timeout_seconds=self.spec.call_timeout_s)
                )
            except (OSError, MCPError) as exc:
                raise InvalidInputError(
                    f"MCP server {self.spec.name!r} could not be started with {self.spec.command!r}: {exc}; "
                    "check the command and its arguments"
                ) from None
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.__aexit__(exc_type, exc, tb)

    def _connected(self) -> Client:
        if self._client is None:
            raise InvalidInputError(f"MCP server {self.spec.name!r} is not connected; use it inside 'async with'")
        return self._client

    async def list_mcp_tools(self) -> list[mcp_types.Tool]:
        client, cursor, tools = self._connected(), None, []
        for _ in range(MAX_LISTED_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Call ``tool`` over the open session; an ``isError`` result raises ``ToolExecutionError``."""
        self.calls += 1
        try:
            result = await self._connected().call_tool(tool, arguments)
        except MCPError as exc:
            raise ToolExecutionError(f"MCP server {self.spec.name!r} refused {tool}: {exc}") from None
        text = _text(result)
        if result.is_error:
            raise ToolExecutionError(text or f"{tool} failed on MCP server {self.spec.name!r}")
        return text

    async def tools(self) -> list[FlowToolCall]:
        """The server's tools as ``FlowToolCall``s (names made model-safe and prefixed as configured)."""
        out = []
        for tool in await self.list_mcp_tools():
            schema = dict(tool.input_schema) or {"type": "object"}
            schema.setdefault("type", "object")
            out.append(
                FlowToolCall(
                    name=_UNSAFE.sub("_", self.spec.tool_prefix + tool.name)[:64],
                    description=tool.description or tool.title or tool.name,
                    parameters=schema,
                    fn=self._caller(tool.name),
                    resource_key=self.spec.resource_key,
                )
            )
        return out

    def _caller(self, tool: str) -> Any:
        async def call(**arguments: Any) -> str:
            return await self.call(tool, arguments)

        return call


def mcp_server_specs(home: Path) -> list[MCPServerSpec]:
    """The ``mcp_servers`` declared in ``$RATH_HOME/config.json`` (none when absent)."""
    declared = read_config(home).get("mcp_servers") or {}
    if not isinstance(declared, dict):
        raise InvalidInputError("mcp_servers in config.json must be an object of name -> {command, args, env}")
    specs = []
    for name, raw in declared.items():
        if not isinstance(raw, dict) or not isinstance(raw.get("command"), str):
            raise InvalidInputError(f"mcp_servers.{name} needs a 'command' string (and optional 'args', 'env')")
        specs.append(
            MCPServerSpec(
                name=name,
                command=raw["command"],
                args=tuple(str(a) for a in raw.get("args", [])),
                env={str(k): str(v) for k, v in (raw.get("env") or {}).items()},
                cwd=raw.get("cwd"),
                tool_prefix=str(raw.get("tool_prefix", "")),
                resource_key=raw.get("resource_key"),
            )
        )
    return specs
