"""An agent's MCP tool call carries its step's trace context in ``_meta`` (SEP-414): the tool server, here
a real ``rath-mcp serve`` over stdio started as an agent's tool server, parents its request span there,
and a run that request starts (``run_start``, as ``delegate`` does) lands in the step's trace too.

Both sides export to one local OTLP receiver: the caller's tracing in this process, the server's by the
standard ``OTEL_*`` variables given in its spec (a tool server gets a minimal environment).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from runtime.flow.mcp_tools import MCPServerSpec, MCPToolServer
from runtime.telemetry.otel import OtelTracing
from runtime.telemetry.otlp import OtlpSpanExporter
from tests.otel_receiver import Receiver, receiving, trace_env

pytestmark = pytest.mark.anyio


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


async def test_a_tool_call_from_a_step_is_the_parent_of_the_servers_request_and_its_run(
    tmp_path: Path, receiver: Receiver
) -> None:
    serve = ("-m", "rath_mcp", "serve", "--transport", "stdio", "--home", str(tmp_path / "tools"))
    spec = MCPServerSpec(name="rath", command=sys.executable, args=serve, env=trace_env(receiver.url))
    tracing = OtelTracing(OtlpSpanExporter(endpoint=f"{receiver.url}/v1/traces"))
    try:
        async with MCPToolServer(spec, tracing=tracing) as server:
            with tracing.span("step act"):
                step = tracing.ids()
                await server.call("run_start", {"workflow": "echo", "message": "hi", "wait_s": 20})
    finally:
        tracing.shutdown()
    assert step is not None
    (request,) = await anyio.to_thread.run_sync(receiver.wait_for, lambda s: s.name == "tools/call run_start")
    assert (request.trace_id, request.parent_span_id) == step
    (drive,) = await anyio.to_thread.run_sync(receiver.wait_for, lambda s: s.name == "run echo")
    assert (drive.trace_id, drive.parent_span_id) == (step[0], request.span_id)
