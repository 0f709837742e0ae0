"""A model call answered by the MCP client's own model (``sampling``) is a GenAI span, and its
``sampling/createMessage`` request carries that span's W3C trace context in ``_meta`` (SEP-414),
so a client that traces too puts its model's work inside our trace."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent

from rath_mcp.server import build_server
from runtime import Runtime
from runtime.telemetry.otel import OtelTracing
from runtime.telemetry.otlp import OtlpSpanExporter
from tests.mcp.conftest import call
from tests.otel_receiver import receiving

pytestmark = pytest.mark.anyio


async def test_a_sampling_request_carries_the_model_calls_trace_context(home: Path) -> None:
    asked: list[CreateMessageRequestParams] = []

    async def model(context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text="Four."), model="client")

    with receiving() as receiver:
        tracing = OtelTracing(OtlpSpanExporter(endpoint=f"{receiver.url}/v1/traces"))
        try:
            async with (
                Runtime.open(home, tracing=tracing) as rt,
                Client(build_server(rt, traces=tracing), mode="legacy", sampling_callback=model) as client,
            ):
                inp = {"provider": "sampling", "memory": False}
                run = await call(client, "run_start", workflow="agent", message="2+2?", input=inp, wait_s=20)
                assert run["status"] == "succeeded", run["error"]
        finally:
            tracing.shutdown()
        chat = await anyio.to_thread.run_sync(receiver.named, "chat sampling")
    assert chat.kind == "client" and chat.attributes["gen_ai.provider.name"] == "mcp.sampling"
    meta = asked[0].meta or {}
    assert str(meta.get("traceparent", "")).startswith(f"00-{chat.trace_id}-{chat.span_id}-")
