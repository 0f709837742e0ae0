"""Stdio MCP servers adapted as ``FlowToolCall`` tools, over a small JSON-RPC client of our own.

``runtime/`` knows nothing of the MCP SDK (a layering rule ``tests/test_layers.py`` enforces), so
this module speaks the stdio transport itself: newline-delimited JSON-RPC 2.0, the ``initialize``
handshake, ``tools/list`` and ``tools/call``. That is all an agent needs from a tool server.

``MCPToolServer`` starts the server process once and keeps one connection for as long as the
``async with`` block lasts: every tool call goes over it (no process per call), so a server that
keeps state between calls behaves as under any MCP host. A result with ``isError`` stays an error:
it becomes a typed ``execution_error`` tool result, never a success. The server gets a minimal
environment (``PATH``, ``HOME``, locale, ...) plus what its spec gives: model API keys in our
environment are not handed to third-party tool servers. Servers can be declared in
``$RATH_HOME/config.json``::

    {"mcp_servers": {"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                               "env": {}, "tool_prefix": "files_"}}}
"""

from __future__ import annotations

import json
import os
import re
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import ByteSendStream, Process
from anyio.streams.buffered import BufferedByteReceiveStream

from runtime.errors import InvalidInputError
from runtime.flow.tools import EffectKind, FlowToolCall, ToolExecutionError, ToolFn
from runtime.providers.config import read_config
from runtime.telemetry import Tracing

PROTOCOL_VERSION = "2025-06-18"
CLIENT_INFO = {"name": "rath-mcp", "version": "0.1.0"}
SAFE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TZ")
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MAX_LISTED_PAGES = 50
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


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
    start_timeout_s: float = 30.0


class MCPServerError(ToolExecutionError):
    """The MCP server answered a request with a JSON-RPC error, died, or did not answer in time."""


def result_text(result: dict[str, Any]) -> str:
    """A ``tools/call`` result as text: text blocks joined, other blocks described, else structured content."""
    parts: list[str] = []
    for block in result.get("content") or []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "resource_link":
            parts.append(f"[resource {block.get('uri')}]")
        elif kind == "resource":
            resource = block.get("resource") or {}
            text = resource.get("text")
            parts.append(text if isinstance(text, str) else f"[binary resource {resource.get('uri')}]")
        else:
            parts.append(f"[{kind} content, {block.get('mimeType', 'unknown type') if kind else 'unknown'}]")
    if not parts and result.get("structuredContent") is not None:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    return "\n".join(parts)


def _effect_class(annotations: Any) -> EffectKind:
    """The server's own hints (MCP tool annotations) decide how a call is replayed after a crash."""
    hints = annotations if isinstance(annotations, dict) else {}
    if hints.get("readOnlyHint") is True:
        return "read_only"
    return "idempotent" if hints.get("idempotentHint") is True else "non_idempotent"


class MCPToolServer:
    """One long-lived stdio connection to an MCP server; ``tools()`` lists its tools as FlowToolCalls."""

    def __init__(self, spec: MCPServerSpec, *, tracing: Tracing | None = None) -> None:
        """``tracing``: each tool call carries the current span's W3C trace context in ``_meta`` (SEP-414),
        so a server that traces (another rath-mcp: its request, a run it starts) joins our trace."""
        self.spec = spec
        self._tracing = tracing or Tracing()
        self.calls = 0
        self.server_info: dict[str, Any] = {}
        self._stack: AsyncExitStack | None = None
        self._process: Process | None = None
        self._stdin: ByteSendStream | None = None
        self._write_lock = anyio.Lock()
        self._next_id = 0
        self._waiting: dict[int, tuple[anyio.Event, list[dict[str, Any]]]] = {}
        self._closed_reason: str | None = None

    def __repr__(self) -> str:
        return f"MCPToolServer(name={self.spec.name!r}, command={self.spec.command!r})"  # env may hold secrets

    # -- lifecycle -------------------------------------------------------------------------------
    async def __aenter__(self) -> MCPToolServer:
        env = {k: os.environ[k] for k in SAFE_ENV if k in os.environ} | dict(self.spec.env)
        async with AsyncExitStack() as stack:
            try:
                process = await anyio.open_process(
                    [self.spec.command, *self.spec.args], env=env, cwd=self.spec.cwd, stderr=None
                )
            except OSError as exc:
                raise InvalidInputError(
                    f"MCP server {self.spec.name!r} could not be started with {self.spec.command!r}: "
                    f"{exc.strerror or exc}; check the command and its arguments"
                ) from None
            stack.push_async_callback(self._stop, process)
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tg.cancel_scope.cancel)
            self._process, self._stdin = process, process.stdin
            assert process.stdout is not None
            tg.start_soon(self._read, BufferedByteReceiveStream(process.stdout))
            try:
                await self._initialize()
            except InvalidInputError as exc:
                failure = exc  # raised once the process is stopped, outside the task group (no exception group)
            else:
                self._stack = stack.pop_all()
                return self
        raise failure

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Closed without the caller's exception: it propagates as it is, never wrapped in a task group's.
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    async def _stop(self, process: Process) -> None:
        """Close stdin (the stdio way to ask a server to exit), then terminate/kill if it lingers."""
        self._closed_reason = self._closed_reason or "the connection was closed"
        with anyio.CancelScope(shield=True):
            if process.stdin is not None:
                await process.stdin.aclose()
            with anyio.move_on_after(2):
                await process.wait()
                return
            process.terminate()
            with anyio.move_on_after(2):
                await process.wait()
                return
            process.kill()
            await process.wait()

    async def _initialize(self) -> None:
        params = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO}
        try:
            result = await self._request("initialize", params, self.spec.start_timeout_s)
            await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        except MCPServerError as exc:
            raise InvalidInputError(
                f"MCP server {self.spec.name!r} did not complete the MCP handshake: {exc}; "
                "check that the command starts an MCP server on stdio"
            ) from None
        self.server_info = dict(result.get("serverInfo") or {})

    # -- JSON-RPC ---------------------------------------------------------------------------------
    async def _send(self, message: dict[str, Any]) -> None:
        if self._stdin is None or self._closed_reason is not None:
            raise MCPServerError(
                f"MCP server {self.spec.name!r} is not connected ({self._closed_reason or 'not started'})"
            )
        data = (json.dumps(message, ensure_ascii=False) + "\n").encode()
        async with self._write_lock:
            try:
                await self._stdin.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                raise MCPServerError(f"MCP server {self.spec.name!r} stopped reading its input") from None

    async def _request(self, method: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self._next_id += 1
        request_id, done = self._next_id, anyio.Event()
        slot: list[dict[str, Any]] = []
        self._waiting[request_id] = (done, slot)
        try:
            await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            with anyio.move_on_after(timeout_s):
                await done.wait()
            if not slot:
                raise MCPServerError(f"MCP server {self.spec.name!r} did not answer {method} within {timeout_s:g}s")
        finally:
            self._waiting.pop(request_id, None)
        reply = slot[0]
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {"message": str(reply["error"])}
            raise MCPServerError(f"{method} failed on MCP server {self.spec.name!r}: {error.get('message', error)}")
        result = reply.get("result")
        return result if isinstance(result, dict) else {}

    async def _read(self, stdout: BufferedByteReceiveStream) -> None:
        """Route the server's messages: answers to their waiters, its own requests refused politely."""
        try:
            while True:
                line = await stdout.receive_until(b"\n", MAX_MESSAGE_BYTES)
                try:
                    message = json.loads(line)
                except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
                    continue  # a stray non-JSON line (a badly behaved server's log): not a protocol message
                if isinstance(message, dict):
                    await self._dispatch(message)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        except anyio.DelimiterNotFound:
            self._closed_reason = f"it sent a message over {MAX_MESSAGE_BYTES} bytes"
        self._closed_reason = self._closed_reason or "the server process exited"
        for done, slot in list(self._waiting.values()):
            slot.append({"error": {"message": f"no answer: {self._closed_reason}"}})
            done.set()

    async def _dispatch(self, message: dict[str, Any]) -> None:
        """Handle one message; never raises, as the reader failing would cancel whoever opened the connection."""
        if "method" in message:
            if "id" in message:  # a request from the server (ping, roots, sampling): we offer none but ping
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
                if message["method"] == "ping":
                    reply["result"] = {}
                else:
                    reply["error"] = {"code": -32601, "message": f"{message['method']} is not supported by this client"}
                with suppress(MCPServerError):  # it stopped reading: our own requests fail on their send
                    await self._send(reply)
            return  # notifications (logging, progress, list changes) need no answer
        request_id = message.get("id")
        waiter = self._waiting.get(request_id) if type(request_id) is int else None  # our ids are ints
        if waiter is not None:
            waiter[1].append(message)
            waiter[0].set()

    # -- tools --------------------------------------------------------------------------------------
    async def list_mcp_tools(self) -> list[dict[str, Any]]:
        """The server's tool definitions (every page)."""
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_LISTED_PAGES):
            page = await self._request("tools/list", {"cursor": cursor} if cursor else {}, self.spec.call_timeout_s)
            tools.extend(t for t in page.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("name"), str))
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Call ``tool`` over the open connection; an ``isError`` result raises ``ToolExecutionError``."""
        self.calls += 1
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if carrier := self._tracing.headers():  # the calling step's span (none when tracing is off)
            params["_meta"] = carrier
        result = await self._request("tools/call", params, self.spec.call_timeout_s)
        text = result_text(result)
        if result.get("isError"):
            raise ToolExecutionError(text or f"{tool} failed on MCP server {self.spec.name!r}")
        return text

    async def tools(self) -> list[FlowToolCall]:
        """The server's tools as ``FlowToolCall``s (names made model-safe and prefixed as configured)."""
        out = []
        for tool in await self.list_mcp_tools():
            schema = dict(tool.get("inputSchema") or {})
            schema.setdefault("type", "object")
            out.append(
                FlowToolCall(
                    name=_UNSAFE.sub("_", self.spec.tool_prefix + tool["name"])[:64],
                    description=str(tool.get("description") or tool.get("title") or tool["name"]),
                    parameters=schema,
                    fn=self._caller(tool["name"]),
                    resource_key=self.spec.resource_key,
                    effect_class=_effect_class(tool.get("annotations")),
                )
            )
        return out

    def _caller(self, tool: str) -> ToolFn:
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
