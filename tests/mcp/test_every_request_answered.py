"""Every JSON-RPC request gets a JSON-RPC answer, on every transport, even one no parser here accepts.

Raw JSON-RPC, as a fuzzer or a client with its own encoder sends it, to real ``rath-mcp serve``
processes: over stdio, Streamable HTTP (both eras) and legacy SSE. A lone surrogate escape, nesting
past the parsers' limits, NaN/Infinity and text that is not JSON at all each get an error answer
carrying the request's id (null only when there is no id to find), the server goes on serving,
and nothing was written.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio
import httpx
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.transports._servers import RunningServer, http_server, serve_command

pytestmark = pytest.mark.anyio

INVALID_PARAMS, PARSE_ERROR = -32602, -32700
LEGACY = "2025-06-18"
MODERN = "2026-07-28"
TIMEOUT_S = 30  # a safety net: the bug this guards against is an answer that never comes


def deep_text(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


def call(request_id: int, tool: str, arguments_text: str) -> str:
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
        f'"params":{{"name":"{tool}","arguments":{arguments_text}}}}}'
    )


#: (name, raw request, expected error code, text the error message holds)
BAD: list[tuple[str, str, int, str]] = [
    (
        "lone surrogate",
        call(11, "session_create", '{"message":"half \\ud800 a pair"}'),
        INVALID_PARAMS,
        "params.arguments.message holds a lone UTF-16 surrogate",
    ),
    (
        "lone trailing surrogate in a key",
        call(12, "session_create", '{"metadata":{"\\udc00":1}}'),
        INVALID_PARAMS,
        "lone UTF-16 surrogate",
    ),
    ("250 levels deep", call(13, "session_create", f'{{"metadata":{deep_text(250)}}}'), INVALID_PARAMS, "deeper"),
    ("5000 levels deep", call(14, "session_create", f'{{"metadata":{deep_text(5000)}}}'), INVALID_PARAMS, "deeper"),
    (
        "NaN in run input",
        call(15, "run_start", '{"workflow":"echo","input":{"n":NaN}}'),
        INVALID_PARAMS,
        "params.arguments.input.n is nan",
    ),
    (
        "Infinity in an interrupt value",
        call(16, "interrupt_resolve", '{"interrupt_id":"int_1","action":"respond","value":[-Infinity]}'),
        INVALID_PARAMS,
        "params.arguments.value[0] is -inf",
    ),
]
#: A request cut short: not JSON, yet its id can be found, so the parse error carries it.
CUT_SHORT = '{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"session_create",'
GARBAGE = "garbage{"


async def check_unparsable(wire: Wire) -> None:
    check(await wire.ask(CUT_SHORT, 17), 17, PARSE_ERROR, "not valid JSON")
    answer = await wire.ask(GARBAGE, None)
    assert answer["id"] is None and answer["error"]["code"] == PARSE_ERROR, answer


class Wire(Protocol):
    async def ask(self, text: str, request_id: int | None) -> dict[str, Any]: ...


def check(answer: dict[str, Any], request_id: int, code: int, fragment: str) -> None:
    assert answer.get("id") == request_id and "error" in answer, answer
    assert answer["error"]["code"] == code and fragment in answer["error"]["message"], answer


async def check_bad_requests(wire: Wire, *, cases: list[tuple[str, str, int, str]] = BAD) -> None:
    """Every bad request is answered by id; the server then still serves, and holds no session."""
    for name, text, code, fragment in cases:
        request_id = json.loads(text.split(',"method"')[0] + "}")["id"]
        check(await wire.ask(text, request_id), request_id, code, fragment)
        assert name
    listed = await wire.ask(call(99, "session_list", "{}"), 99)
    assert listed["result"]["structuredContent"]["sessions"] == [], listed


# -- stdio -------------------------------------------------------------------------------------------


class StdioWire:
    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.stdin = process.stdin
        self.stdout = BufferedByteReceiveStream(process.stdout)

    async def send(self, text: str) -> None:
        await self.stdin.send(text.encode() + b"\n")

    async def ask(self, text: str, request_id: int | None) -> dict[str, Any]:
        await self.send(text)
        with anyio.fail_after(TIMEOUT_S):
            while True:
                line = await self.stdout.receive_until(b"\n", 10_000_000)
                message: dict[str, Any] = json.loads(line)
                if "id" in message and message["id"] == request_id:
                    return message


@asynccontextmanager
async def stdio_wire(home: Path) -> AsyncIterator[StdioWire]:
    async with await anyio.open_process(serve_command("stdio", home), stderr=subprocess.DEVNULL) as process:
        wire = StdioWire(process)
        init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        answer = await wire.ask(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}), 1)
        assert "result" in answer, answer
        await wire.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        try:
            yield wire
        finally:
            await process.stdin.aclose() if process.stdin else None
            with anyio.move_on_after(10, shield=True):
                await process.wait()
            if process.returncode is None:
                process.kill()


async def test_every_bad_request_over_stdio_is_answered(home: Path) -> None:
    async with stdio_wire(home) as wire:
        await check_bad_requests(wire)
        await check_unparsable(wire)
        assert (await wire.ask('{"jsonrpc":"2.0","id":100,"method":"ping"}', 100))["result"] == {}


# -- Streamable HTTP ---------------------------------------------------------------------------------


def parse_http(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message in a Streamable HTTP answer (a JSON body or one SSE ``data:`` event)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        assert data, response.text
        message: dict[str, Any] = json.loads(data[-1])
        return message
    body: dict[str, Any] = response.json()
    return body


class HttpWire:
    def __init__(self, http: httpx.AsyncClient, url: str, era: str) -> None:
        self.http, self.url, self.era = http, url, era
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    async def initialize(self) -> None:
        init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        response = await self.http.post(self.url, content=body, headers=self.headers)
        assert "result" in parse_http(response), response.text
        self.headers |= {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": LEGACY}
        done = await self.http.post(
            self.url, content='{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=self.headers
        )
        assert done.status_code == 202, done.text

    async def ask(self, text: str, request_id: int | None) -> dict[str, Any]:
        headers = dict(self.headers)
        if self.era == MODERN and '"name":"' in text:  # no handshake: era, client and names ride on each request
            tool = text.split('"name":"', 1)[1].split('"', 1)[0]
            meta = (
                f'"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN}",'
                '"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},'
                '"io.modelcontextprotocol/clientCapabilities":{}},'
            )
            text = text.replace('"params":{', '"params":{' + meta, 1)
            headers |= {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": tool}
        with anyio.fail_after(TIMEOUT_S):
            response = await self.http.post(self.url, content=text.encode(), headers=headers)
        return parse_http(response)


@pytest.mark.parametrize("era", ["legacy", MODERN])
async def test_every_bad_request_over_streamable_http_is_answered(home: Path, era: str) -> None:
    async with http_server("http", home) as server, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        wire = HttpWire(http, f"{server.base}/mcp", era)
        if era == "legacy":
            await wire.initialize()
        await check_bad_requests(wire)
        await check_unparsable(wire)


# -- legacy SSE --------------------------------------------------------------------------------------


class SseWire:
    """POSTs to the endpoint the event stream names; answers arrive on the event stream."""

    def __init__(self, http: httpx.AsyncClient, server: RunningServer) -> None:
        self.http, self.server = http, server
        self.answers_in, self.answers = anyio.create_memory_object_stream[dict[str, Any]](100)
        self.endpoint = anyio.Event()
        self.url = ""

    async def listen(self) -> None:
        async with self.http.stream("GET", f"{self.server.base}/sse") as response:
            event = ""
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:") and event == "endpoint":
                    self.url = self.server.base + line[5:].strip()
                    self.endpoint.set()
                elif line.startswith("data:") and event == "message":
                    await self.answers_in.send(json.loads(line[5:].strip()))

    async def ask(self, text: str, request_id: int | None) -> dict[str, Any]:
        response = await self.http.post(self.url, content=text.encode(), headers={"Content-Type": "application/json"})
        assert response.status_code in (202, 400), response.text
        with anyio.fail_after(TIMEOUT_S):
            while True:
                message = await self.answers.receive()
                if message.get("id") == request_id:
                    return message


async def test_every_bad_request_over_sse_is_answered(home: Path) -> None:
    async with http_server("sse", home) as server, httpx.AsyncClient(timeout=None) as http:
        wire = SseWire(http, server)
        async with wire.answers_in, wire.answers, anyio.create_task_group() as tg:
            tg.start_soon(wire.listen)
            with anyio.fail_after(TIMEOUT_S):
                await wire.endpoint.wait()
            init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
            answer = await wire.ask(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}), 1)
            assert "result" in answer, answer
            posted = await http.post(
                wire.url,
                content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                headers={"Content-Type": "application/json"},
            )
            assert posted.status_code == 202
            await check_bad_requests(wire)
            await check_unparsable(wire)
            tg.cancel_scope.cancel()
