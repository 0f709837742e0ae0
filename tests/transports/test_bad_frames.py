"""Whatever is wrong with a frame, it gets a JSON-RPC error answer, and no frame ends a server or a session.

CONTRACT §4: raw frames, as a fuzzer or a client with its own encoder sends them, to real
``rath-mcp serve`` processes over a stdio pipe, Streamable HTTP (both eras) and legacy SSE on
127.0.0.1. One server per transport serves every case (started with ``--max-frame-bytes 64K`` so a
frame over the limit is cheap to send); after each bad frame the same connection, and over HTTP and
SSE another client's session, still answers. The default limit (4 MiB) is checked once, on stdio.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
from mcp_types import JSONRPCNotification, JSONRPCResponse

from rath_mcp.wire import MAX_FRAME_BYTES, encode
from tests.transports._servers import serve_command

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
LIMIT = 65536
TIMEOUT_S = 30  # a safety net: the bug this guards against is an answer that never comes
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
BIG = "x" * (LIMIT + 10)

#: (name, raw frame, expected error code, the id the answer must carry); a batch is answered with a list.
FRAMES: list[tuple[str, str, int, Any]] = [
    ("batch", '[{"jsonrpc":"2.0","id":"b1","method":"ping"},{"jsonrpc":"2.0","method":"x"}]', INVALID_REQUEST, ["b1"]),
    ("empty batch", "[]", INVALID_REQUEST, None),
    ("jsonrpc 1.0", '{"jsonrpc":"1.0","id":21,"method":"ping"}', INVALID_REQUEST, 21),
    ("jsonrpc a number", '{"jsonrpc":2.0,"id":22,"method":"ping"}', INVALID_REQUEST, 22),
    ("jsonrpc missing", '{"id":23,"method":"ping"}', INVALID_REQUEST, 23),
    ("id null", '{"jsonrpc":"2.0","id":null,"method":"ping"}', INVALID_REQUEST, None),
    ("id an object", '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', INVALID_REQUEST, None),
    ("id an array", '{"jsonrpc":"2.0","id":[24],"method":"ping"}', INVALID_REQUEST, None),
    ("id a float", '{"jsonrpc":"2.0","id":2.5,"method":"ping"}', INVALID_REQUEST, None),
    ("id a whole float", '{"jsonrpc":"2.0","id":25.0,"method":"ping"}', INVALID_REQUEST, None),
    ("id a boolean", '{"jsonrpc":"2.0","id":true,"method":"ping"}', INVALID_REQUEST, None),
    ("method missing", '{"jsonrpc":"2.0","id":26}', INVALID_REQUEST, 26),
    ("method a number", '{"jsonrpc":"2.0","id":27,"method":7}', INVALID_REQUEST, 27),
    ("method null, no id", '{"jsonrpc":"2.0","method":null}', INVALID_REQUEST, None),
    ("params an array", '{"jsonrpc":"2.0","id":28,"method":"ping","params":[1]}', INVALID_PARAMS, 28),
    ("params a string", '{"jsonrpc":"2.0","id":29,"method":"ping","params":"p"}', INVALID_REQUEST, 29),
    ("response without id", '{"jsonrpc":"2.0","result":{}}', INVALID_REQUEST, None),
    ("result not an object", '{"jsonrpc":"2.0","id":40,"result":5}', INVALID_REQUEST, None),
    ("error code a string", '{"jsonrpc":"2.0","id":41,"error":{"code":"x","message":"m"}}', INVALID_REQUEST, None),
    ("not an object", "42", INVALID_REQUEST, None),
    ("surrogate in method", '{"jsonrpc":"2.0","id":30,"method":"pi\\ud800ng"}', INVALID_REQUEST, 30),
    ("surrogate in a string id", '{"jsonrpc":"2.0","id":"a\\ud800","method":"ping"}', INVALID_REQUEST, None),
    ("surrogate in jsonrpc", '{"jsonrpc":"2.\\udc00","id":31,"method":"ping"}', INVALID_REQUEST, 31),
    ("surrogate in a key", '{"jsonrpc":"2.0","id":32,"method":"ping","\\udc00":1}', INVALID_REQUEST, 32),
    ("surrogate in a notification", '{"jsonrpc":"2.0","method":"notifications/\\ud800"}', INVALID_REQUEST, None),
    (
        "surrogate in params",
        '{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"name":"session_list","arguments":{"q":"\\ud800"}}}',
        INVALID_PARAMS,
        33,
    ),
    ("not JSON", "garbage{", PARSE_ERROR, None),
    ("cut short", '{"jsonrpc":"2.0","id":34,"method":"tools/call","params":{', PARSE_ERROR, 34),
    ("over the limit", f'{{"jsonrpc":"2.0","id":35,"method":"ping","params":{{"p":"{BIG}"}}}}', INVALID_REQUEST, 35),
    ("over, id last", f'{{"jsonrpc":"2.0","method":"ping","params":{{"p":"{BIG}"}},"id":"z"}}', INVALID_REQUEST, "z"),
]


class Wire(Protocol):
    def send(self, frame: str) -> None: ...
    def answer(self, match: Callable[[Any], bool]) -> Any: ...


def answered(expected_id: Any) -> Callable[[Any], bool]:
    """Is this message the error answer (or batch answer) a frame expecting ``expected_id`` gets?"""
    if isinstance(expected_id, list):
        return lambda message: isinstance(message, list)
    return lambda message: isinstance(message, dict) and "error" in message and message.get("id", 0) == expected_id


MODERN = "2026-07-28"
#: What a 2026-07-28 request carries in place of the handshake.
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def ping(wire: Wire, request_id: str) -> None:
    """The connection still serves: a ping (a 2026-07-28 request has no ping: a tool call instead)."""
    if isinstance(wire, HttpWire) and wire.era == MODERN:
        call = {"name": "session_list", "arguments": {}, "_meta": MODERN_META}
        wire.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call}))
        assert "result" in wire.answer(lambda m: isinstance(m, dict) and m.get("id") == request_id)
        return
    wire.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}))
    message = wire.answer(lambda m: isinstance(m, dict) and m.get("id") == request_id)
    assert message.get("result") == {}, message


class Lines:
    """JSON messages read off a byte stream by a thread, handed over through a queue."""

    def __init__(self) -> None:
        self.messages: queue.Queue[Any] = queue.Queue()

    def feed(self, lines: Iterator[bytes | str]) -> None:
        try:
            for line in lines:
                if line.strip():
                    self.messages.put(json.loads(line))
        except (httpx.HTTPError, OSError, ValueError):  # the stream ended with the server
            pass

    def answer(self, match: Callable[[Any], bool]) -> Any:
        while True:
            message = self.messages.get(timeout=TIMEOUT_S)
            if match(message):
                return message


def start_reading(target: Callable[[], object]) -> threading.Thread:
    """A thread reading a server's stream; it ends when the stream does (joined when the server stops)."""
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


class StdioWire(Lines):
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        super().__init__()
        assert process.stdin is not None and process.stdout is not None
        self.process, self.stdin, stdout = process, process.stdin, process.stdout
        self.readers = [start_reading(lambda: self.feed(iter(stdout.readline, b"")))]

    def send(self, frame: str) -> None:
        self.stdin.write(frame.encode() + b"\n")
        self.stdin.flush()

    def open(self) -> StdioWire:
        self.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
        assert "result" in self.answer(lambda m: m.get("id") == 1)
        self.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        return self


class HttpWire:
    """Streamable HTTP: a handshake-era session or 2026-07-28 requests; each answer is in its POST's response."""

    def __init__(self, http: httpx.Client, url: str, era: str) -> None:
        self.http, self.url, self.era = http, url, era
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        self.last: Any = None
        if era == MODERN:
            self.headers |= {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "session_list"}
            return
        response = self.http.post(self.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
        self.headers |= {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        self.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def send(self, frame: str) -> None:
        response = self.http.post(self.url, content=frame.encode(), headers=self.headers)
        self.status = response.status_code
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
            self.last = json.loads(data[-1])
        else:
            self.last = response.json() if response.content else None

    def answer(self, match: Callable[[Any], bool]) -> Any:
        assert match(self.last), (self.status, self.last)
        return self.last


class SseWire(Lines):
    """Legacy SSE: POSTs to the endpoint the event stream names; answers arrive on the event stream."""

    def __init__(self, http: httpx.Client, base: str) -> None:
        super().__init__()
        self.http, self.base = http, base
        self.endpoint: queue.Queue[str] = queue.Queue()
        self.readers = [start_reading(self.listen)]
        self.url = base + self.endpoint.get(timeout=TIMEOUT_S)
        self.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
        assert "result" in self.answer(lambda m: m.get("id") == 1)
        self.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def listen(self) -> None:
        try:
            with self.http.stream("GET", f"{self.base}/sse") as response:
                lines = response.iter_lines()
                for line in lines:
                    if line.startswith("data:") and "session_id=" in line:
                        self.endpoint.put(line[5:].strip())
                        break
                self.feed(line[5:] for line in lines if line.startswith("data:"))
        except httpx.HTTPError:  # the server was stopped
            pass

    def send(self, frame: str) -> None:
        posted = self.http.post(self.url, content=frame.encode(), headers={"Content-Type": "application/json"})
        assert posted.status_code == 202, posted.text


def stop(process: subprocess.Popen[bytes], readers: list[threading.Thread]) -> None:
    """Stop the server, wait for the threads reading its streams, and close its pipes."""
    if process.stdin is not None:
        process.stdin.close()  # a stdio server ends at end of input
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for thread in readers:
        thread.join(TIMEOUT_S)
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


def http_process(transport: str, home: Path) -> tuple[subprocess.Popen[bytes], str, threading.Thread]:
    """``rath-mcp serve`` on a free port (``--port 0``); its base URL, read from the line announcing it."""
    argv = serve_command(transport, home, 0, "--max-frame-bytes", "64K")  # type: ignore[arg-type]
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    for raw in iter(process.stderr.readline, b""):
        line = raw.decode()
        if "serving MCP over" in line:
            drain = start_reading(process.stderr.read)  # keep the pipe drained
            return process, line.split(" on ", 1)[1].strip().rsplit("/", 1)[0], drain
    stop(process, [])
    raise AssertionError(f"rath-mcp serve --transport {transport} did not start (exit {process.returncode})")


@pytest.fixture(scope="module", params=["stdio", "http", f"http-{MODERN}", "sse"])
def wires(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Wire]]:
    """The wire bad frames are sent on, then (HTTP, SSE) another client's session on the same server."""
    home = tmp_path_factory.mktemp(request.param)
    if request.param == "stdio":
        argv = serve_command("stdio", home, None, "--max-frame-bytes", "64K")
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        wire = StdioWire(process)
        try:
            yield [wire.open()]
        finally:
            stop(process, wire.readers)
        return
    process, base, drain = http_process("http" if request.param.startswith("http") else "sse", home)
    readers = [drain]
    with httpx.Client(timeout=TIMEOUT_S) as http:
        try:
            if request.param.startswith("http"):
                era = MODERN if request.param.endswith(MODERN) else "legacy"
                yield [HttpWire(http, f"{base}/mcp", era), HttpWire(http, f"{base}/mcp", era)]
            else:
                sse = [SseWire(http, base), SseWire(http, base)]
                readers += [thread for wire in sse for thread in wire.readers]
                yield list(sse)
        finally:
            process.terminate()  # ends the event streams first, so their readers finish
            stop(process, readers)


@pytest.mark.parametrize(("name", "frame", "code", "request_id"), FRAMES, ids=[case[0] for case in FRAMES])
def test_every_bad_frame_is_answered_and_ends_nothing(
    wires: list[Wire], name: str, frame: str, code: int, request_id: Any
) -> None:
    wire = wires[0]
    wire.send(frame)
    answer = wire.answer(answered(request_id))
    errors = answer if isinstance(answer, list) else [answer]
    assert [e["id"] for e in errors] == (request_id if isinstance(request_id, list) else [request_id]), answer
    assert all(e["jsonrpc"] == "2.0" and e["error"]["code"] == code for e in errors), answer
    assert all(len(e["error"]["message"]) < 400 for e in errors), answer
    if isinstance(wire, HttpWire):
        assert wire.status == (413 if name.startswith("over") else 400), wire.status
    for n, each in enumerate(wires):  # this connection, and another client's session, go on
        ping(each, f"after {name} {n}")


def test_the_default_limit_is_four_mib_over_stdio(home: Path) -> None:
    process = subprocess.Popen(
        serve_command("stdio", home), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    wire = StdioWire(process)
    try:
        wire.open()
        envelope = '{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"p":"%s"}}'
        fits = envelope % (2, "x" * (MAX_FRAME_BYTES - len(envelope % (2, ""))))
        assert len(fits) == MAX_FRAME_BYTES == 4 * 1024 * 1024
        wire.send(fits)
        assert wire.answer(lambda m: m.get("id") == 2) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        wire.send(fits.replace('"p":"', '"p":"y', 1).replace('"id":2', '"id":3', 1))  # one byte over
        refused = wire.answer(answered(3))
        assert refused["error"]["code"] == INVALID_REQUEST and "over this server's limit" in refused["error"]["message"]
        ping(wire, "after")
    finally:
        stop(process, wire.readers)


def test_a_reply_that_cannot_be_written_is_answered_with_an_internal_error() -> None:
    """The last line of defence on stdio: a reply holding text that is not Unicode never ends the server."""
    bad = JSONRPCResponse(jsonrpc="2.0", id=5, result={"text": "half \ud800 a pair"})
    answer = json.loads(encode(bad))
    assert answer["id"] == 5 and answer["error"]["code"] == -32603, answer
    assert encode(JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"x": "\udc00"})) == b""
