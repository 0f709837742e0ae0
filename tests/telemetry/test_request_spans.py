"""One SERVER span per MCP request, exported over OTLP/HTTP from real ``rath-mcp serve`` processes.

Each case starts a local OTLP receiver (``tests/otel_receiver.py``) and a server pointed at it by
the standard ``OTEL_*`` variables, over stdio, Streamable HTTP and SSE, in both protocol eras, and
drives it with the Python SDK client. Tests wait for spans to arrive (a condition the receiver
signals), never for time to pass.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.otel_receiver import ReceivedSpan, Receiver, receiving, trace_env
from tests.ports import quiet_ports
from tests.transports._servers import ERAS, Era, RunningServer, Wire, http_server, serve_command

pytestmark = pytest.mark.anyio

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
HEADER_TRACE = "0af7651916cd43dd8448eb211c80319c"
HEADER_PARENT = "b7ad6b7169203331"
SECRET = "the launch code is swordfish-4411"
NO_SESSION = "ses_" + "0" * 24
VERSIONS = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}
ERA_ATTRIBUTE = {"legacy": "handshake", "2026-07-28": "2026-07-28"}


def traceparent(trace: str, parent: str) -> str:
    return f"00-{trace}-{parent}-01"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """A receiver, and the environment that sends every server started by the test to it."""
    with receiving() as found:
        for key, value in trace_env(found.url).items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
        yield found


@asynccontextmanager
async def client(
    transport: Wire, era: Era, home: Path, server: RunningServer | None, headers: dict[str, str]
) -> AsyncIterator[Client]:
    """A connected SDK client of ``transport`` in ``era``; ``headers`` go on its HTTP requests."""
    if transport == "stdio":
        argv = serve_command("stdio", home)
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
        async with Client(params, mode=era) as connected:
            yield connected
        return
    assert server is not None
    if transport == "sse":
        async with Client(sse_client(f"{server.base}/sse", headers=headers), mode=era) as connected:
            yield connected
        return
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http,
        Client(streamable_http_client(f"{server.base}/mcp", http_client=http), mode=era) as connected,
    ):
        yield connected


async def scenario(c: Client) -> None:
    """A traced call, a tool error, a protocol error."""
    meta: Any = {"traceparent": traceparent(TRACE, PARENT), "tracestate": "rath=test"}
    created = await c.call_tool("session_create", {"message": SECRET}, meta=meta)
    assert not created.is_error, created
    missing = await c.call_tool("session_get", {"session_id": NO_SESSION})
    assert missing.is_error
    with pytest.raises(MCPError):
        await c.read_resource("rath://sessions/" + NO_SESSION)


async def span(receiver: Receiver, name: str) -> ReceivedSpan:
    return await anyio.to_thread.run_sync(receiver.named, name)


def values(spans: list[ReceivedSpan]) -> str:
    return repr([(s.name, s.attributes, s.status_message, s.events) for s in spans])


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", ["stdio", "http", "sse"])
async def test_a_traceparent_in_meta_parents_the_request_span(
    transport: Wire, era: Era, home: Path, receiver: Receiver
) -> None:
    if transport == "stdio":
        async with client("stdio", era, home, None, {}) as c:
            await scenario(c)
    else:
        async with http_server(transport, home) as server, client(transport, era, home, server, {}) as c:
            await scenario(c)

    created = await span(receiver, "tools/call session_create")
    assert (created.trace_id, created.parent_span_id, created.kind) == (TRACE, PARENT, "server")
    assert created.attributes["mcp.method.name"] == "tools/call"
    assert created.attributes["gen_ai.tool.name"] == "session_create"
    assert created.attributes["gen_ai.operation.name"] == "execute_tool"
    assert created.attributes["jsonrpc.request.id"]
    assert created.attributes["network.transport"] == ("pipe" if transport == "stdio" else "tcp")
    assert created.attributes["mcp.protocol.version"] == VERSIONS[era]
    assert created.attributes["rath.mcp.era"] == ERA_ATTRIBUTE[era]
    assert created.resource["service.name"] == "rath-mcp"
    assert not created.failed

    missing = await span(receiver, "tools/call session_get")
    assert missing.failed and missing.attributes["error.type"] == "tool_error"
    assert missing.trace_id != TRACE  # no caller context: a trace of its own
    read = await anyio.to_thread.run_sync(receiver.wait_for, lambda s: s.name == "resources/read" and s.failed)
    assert read[0].attributes["error.type"].lstrip("-").isdigit()  # the JSON-RPC error code
    assert read[0].attributes["mcp.resource.uri"] == "rath://sessions/" + NO_SESSION
    if era == "legacy":
        assert (await span(receiver, "initialize")).kind == "server"
    assert "swordfish" not in values(receiver.spans)  # no message text unless capture is asked for


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_an_http_traceparent_header_parents_the_request_span(
    transport: Literal["http", "sse"], era: Era, home: Path, receiver: Receiver
) -> None:
    headers = {"traceparent": traceparent(HEADER_TRACE, HEADER_PARENT)}
    async with http_server(transport, home) as server, client(transport, era, home, server, headers) as c:
        assert not (await c.call_tool("session_list", {})).is_error
        listed = await span(receiver, "tools/call session_list")
        assert (listed.trace_id, listed.parent_span_id) == (HEADER_TRACE, HEADER_PARENT)
        # _meta, being the message's own, wins over the header of the HTTP request carrying it
        meta: Any = {"traceparent": traceparent(TRACE, PARENT)}
        assert not (await c.call_tool("workflow_list", {}, meta=meta)).is_error
        both = await span(receiver, "tools/call workflow_list")
        assert (both.trace_id, both.parent_span_id) == (TRACE, PARENT)


async def test_message_text_is_an_attribute_only_when_capture_is_asked_for(
    home: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    async with client("stdio", "legacy", home, None, {}) as c:
        assert not (await c.call_tool("session_create", {"message": SECRET})).is_error
    created = await span(receiver, "tools/call session_create")
    assert SECRET in created.attributes["gen_ai.tool.call.arguments"]
    assert "session_id" in created.attributes["gen_ai.tool.call.result"]


async def test_a_hung_collector_never_holds_up_a_request(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The receiver holds every export unanswered: requests are answered all the same."""
    with receiving(hang=True) as stuck:
        for key, value in trace_env(stuck.url).items():
            monkeypatch.setenv(key, value)
        async with client("stdio", "2026-07-28", home, None, {}) as c:
            assert not (await c.call_tool("session_list", {})).is_error
            assert await anyio.to_thread.run_sync(stuck.held.wait, 60)  # the exporter is now stuck in a request
            for _ in range(3):
                assert not (await c.call_tool("workflow_list", {})).is_error
            stuck.release()
        assert (await span(stuck, "tools/call workflow_list")).kind == "server"


async def test_a_refusing_collector_never_fails_a_request_or_the_stop(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing listens at the endpoint: requests are answered, and the server still stops cleanly."""
    for key, value in trace_env(f"http://127.0.0.1:{quiet_ports(1)[0]}", OTEL_EXPORTER_OTLP_TIMEOUT="1").items():
        monkeypatch.setenv(key, value)
    async with http_server("http", home) as server, client("http", "2026-07-28", home, server, {}) as c:
        for _ in range(3):
            assert not (await c.call_tool("workflow_list", {})).is_error
    assert server.process.returncode == 0, server.stderr()


async def test_a_served_runs_model_call_is_traced(
    home: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve`` hands its tracing to the runtime: an agent run's model call is a GenAI span."""
    monkeypatch.setenv("RATH_PROVIDER", "scripted")
    async with client("stdio", "legacy", home, None, {}) as c:
        arguments = {"workflow": "agent", "message": SECRET, "input": {"memory": False}, "wait_s": 20}
        run = (await c.call_tool("run_start", arguments)).structured_content
        assert run is not None and run["status"] == "succeeded", run
    chat = await span(receiver, "chat scripted")
    assert chat.kind == "client" and chat.attributes["gen_ai.usage.output_tokens"] > 0
    assert "swordfish" not in values(receiver.spans)
