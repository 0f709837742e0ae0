"""Raw JSON-RPC over Streamable HTTP for the task tests: no SDK, so no SDK's task support is assumed.

``Handshake`` speaks 2025-11-25 (initialize, a session id, answers as JSON or SSE, server requests
on a request's SSE stream answered by POSTing the response); ``Modern`` speaks 2026-07-28 (every
request self-contained, its capabilities in ``_meta``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED = "io.modelcontextprotocol/related-task"
#: A server-to-client request (``{"id", "method", "params"}``) in, the result to send back out.
Answerer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = int(error["code"])
        self.message = str(error.get("message"))
        self.data = error.get("data")


async def _messages(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of a response: one JSON body, or the events of an SSE stream."""
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        body = await response.aread()
        if body:
            yield json.loads(body)
        return
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


class _Wire:
    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http = http
        self.url = url
        self.next_id = 0
        self.notifications: list[dict[str, Any]] = []

    def headers(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        return dict(ACCEPT)

    def envelope(self, params: dict[str, Any]) -> dict[str, Any]:
        return params

    async def request(self, method: str, params: dict[str, Any] | None = None, answer: Answerer | None = None) -> Any:
        """Send a request; answer server requests on its stream with ``answer``; return its result."""
        self.next_id += 1
        request_id = self.next_id
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": self.envelope(dict(params or {}))}
        async with self.http.stream("POST", self.url, json=body, headers=self.headers(method, params or {})) as r:
            async for message in _messages(r):
                if message.get("id") == request_id and "method" not in message:
                    if "error" in message:
                        raise RpcError(message["error"])
                    return message["result"]
                if "method" in message and "id" in message:
                    assert answer is not None, f"the server asked {message['method']} unexpectedly"
                    reply = {"jsonrpc": "2.0", "id": message["id"], "result": await answer(message)}
                    posted = await self.http.post(self.url, json=reply, headers=self.headers("", {}))
                    assert posted.status_code in (200, 202), posted.text
                elif "method" in message:
                    self.notifications.append(message)
        raise AssertionError(f"{method}: the response ended without an answer (HTTP {r.status_code})")

    async def poll(
        self, task_id: str, until: Callable[[dict[str, Any]], bool], timeout_s: float = 30
    ) -> dict[str, Any]:
        """``tasks/get`` at the task's own pollInterval until ``until(task)`` (bounded: another process moves it)."""
        with anyio.fail_after(timeout_s):
            while True:
                task: dict[str, Any] = await self.request("tasks/get", {"taskId": task_id})
                if until(task):
                    return task
                await anyio.sleep(min(task.get("pollInterval") or task.get("pollIntervalMs") or 100, 200) / 1000)


class Handshake(_Wire):
    """A 2025-11-25 client session."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        super().__init__(http, url)
        self.session_id = ""
        self.capabilities: dict[str, Any] = {}

    def headers(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        return {**ACCEPT, "Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": "2025-11-25"}

    async def open(self, capabilities: dict[str, Any] | None = None) -> Handshake:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities if capabilities is not None else {"elicitation": {"form": {}}},
            "clientInfo": {"name": "raw-tasks-test", "version": "1"},
        }
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        async with self.http.stream("POST", self.url, json=body, headers=ACCEPT) as r:
            self.session_id = r.headers["mcp-session-id"]
            async for message in _messages(r):
                self.capabilities = message["result"]["capabilities"]
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await self.http.post(self.url, json=done, headers=self.headers("", {}))).status_code == 202
        return self


class Modern(_Wire):
    """A 2026-07-28 client: each request declares its capabilities (the tasks extension unless told not to)."""

    def __init__(self, http: httpx.AsyncClient, url: str, *, declare_tasks: bool = True) -> None:
        super().__init__(http, url)
        self.declare_tasks = declare_tasks

    def headers(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        headers = {**ACCEPT, "MCP-Protocol-Version": "2026-07-28"}
        if method:
            headers["Mcp-Method"] = method
        name = params.get("taskId") or params.get("name")
        if isinstance(name, str):
            headers["Mcp-Name"] = name
        return headers

    def envelope(self, params: dict[str, Any]) -> dict[str, Any]:
        capabilities: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}} if self.declare_tasks else {}
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw-tasks-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        }
        return {**params, "_meta": {**meta, **params.get("_meta", {})}}
