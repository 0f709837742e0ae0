"""Model calls as GenAI client spans (every provider) and sandbox commands as spans, exported over
OTLP/HTTP to a local receiver; the HTTP providers' calls carry the span's ``traceparent``.

The tracing is the real one (``OtelTracing``: SDK, batch processor, OTLP/HTTP exporter) handed to
the registries as the runtime will hand it; the models answer from the fake OpenAI/Anthropic server
(``tests/fakes/model_server.py``). ``shutdown`` flushes, so every span has arrived when it returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.providers import ModelRequest, ProviderRegistry
from runtime.sandbox.policy import SandboxPolicy, ToolLimits
from runtime.sandbox.registry import SandboxRegistry
from runtime.sessions import Placement
from runtime.sessions.model import Chunk
from runtime.telemetry.otel import OtelTracing
from runtime.telemetry.otlp import OtlpSpanExporter
from tests.fakes.model_server import FakeModelServer, Reply, serve
from tests.otel_receiver import Receiver, receiving

pytestmark = pytest.mark.anyio

SECRET = "the launch code is swordfish-4411"
ENV = {
    "openai": {"RATH_PROVIDER": "openai", "OPENAI_API_KEY": "sk-test", "OPENAI_DEFAULT_MODEL": "gpt-test"},
    "anthropic": {
        "RATH_PROVIDER": "anthropic",
        "ANTHROPIC_API_KEY": "sk-test",
        "ANTHROPIC_DEFAULT_MODEL": "claude-test",
    },
    "scripted": {"RATH_PROVIDER": "scripted"},
}
MODEL = {"openai": "gpt-test", "anthropic": "claude-test", "scripted": "scripted"}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    with serve(FakeModelServer()) as server:
        yield server


def tracing_to(receiver: Receiver, *, capture: bool = False) -> OtelTracing:
    return OtelTracing(OtlpSpanExporter(endpoint=f"{receiver.url}/v1/traces"), capture_content=capture)


@pytest.mark.parametrize("kind", ["openai", "anthropic", "scripted"])
async def test_a_model_call_is_a_genai_client_span_with_usage(
    kind: str, home: Path, receiver: Receiver, model_server: FakeModelServer
) -> None:
    model_server.add(Reply("It is sunny.", prompt_tokens=21, completion_tokens=9))
    urls = {
        "openai": {"OPENAI_BASE_URL": model_server.url + "/v1"},
        "anthropic": {"ANTHROPIC_BASE_URL": model_server.url},
    }
    tracing = tracing_to(receiver)
    registry = ProviderRegistry(home, env={**ENV[kind], **urls.get(kind, {})}, tracing=tracing)
    try:
        with tracing.span("step review"):
            answer = await registry.get().complete(ModelRequest(messages=[Chunk(kind="user", content=SECRET)]))
    finally:
        await registry.aclose()
        tracing.shutdown()

    step = receiver.named("step review")
    chat = receiver.named(f"chat {MODEL[kind]}")
    assert (chat.kind, chat.trace_id, chat.parent_span_id) == ("client", step.trace_id, step.span_id)
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == chat.attributes["gen_ai.system"]
    assert chat.attributes["gen_ai.request.model"] == MODEL[kind]
    assert chat.attributes["gen_ai.usage.input_tokens"] == answer.usage.prompt_tokens
    assert chat.attributes["gen_ai.usage.output_tokens"] == answer.usage.completion_tokens
    assert chat.attributes["gen_ai.response.finish_reasons"] == [answer.stop_reason]
    assert "swordfish" not in repr([s.attributes for s in receiver.spans])
    if kind != "scripted":  # the vendor's server was told which span called it
        assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (21, 9)
        sent = model_server.received[0].headers["traceparent"]
        assert sent.startswith(f"00-{chat.trace_id}-{chat.span_id}-")


async def test_messages_are_attributes_only_when_capture_is_asked_for(home: Path, receiver: Receiver) -> None:
    tracing = tracing_to(receiver, capture=True)
    registry = ProviderRegistry(home, env=ENV["scripted"], tracing=tracing)
    try:
        await registry.get().complete(ModelRequest(messages=[Chunk(kind="user", content=SECRET)], system="be terse"))
    finally:
        tracing.shutdown()
    chat = receiver.named("chat scripted")
    assert SECRET in chat.attributes["gen_ai.input.messages"]
    assert SECRET in chat.attributes["gen_ai.output.messages"]  # the scripted provider echoes
    assert chat.attributes["gen_ai.system_instructions"] == "be terse"


async def test_a_sandbox_command_is_a_span_with_its_exit_code_and_limit(tmp_path: Path, receiver: Receiver) -> None:
    tracing = tracing_to(receiver)
    limits = ToolLimits(file_size_bytes=1024**2)
    registry = SandboxRegistry(tmp_path, use_bwrap=False, policy=SandboxPolicy(limits=limits), tracing=tracing)
    try:
        sandbox = await registry.get(Placement(backend="local", workspace="w"))
        failed = await sandbox.run_command(f"echo '{SECRET}' >/dev/null; exit 3")
        big = await sandbox.run_command("head -c 4000000 /dev/zero > big")
        assert (failed.exit_code, big.limit) == (3, "file_size"), big
    finally:
        await registry.aclose()
        tracing.shutdown()
    commands = receiver.wait_for(lambda s: s.name == "sandbox command", count=2)
    exited, limited = sorted(commands, key=lambda s: s.attributes["process.exit.code"] == 3, reverse=True)
    assert exited.attributes["process.exit.code"] == 3 and not exited.failed
    assert exited.attributes["rath.sandbox.workspace"] == "w"
    assert exited.attributes["rath.sandbox.duration_s"] == failed.duration_s  # the command's own measure, carried
    assert limited.attributes["rath.sandbox.limit"] == "file_size"
    assert limited.failed and limited.attributes["error.type"] == "limit.file_size"
    assert "swordfish" not in repr([s.attributes for s in receiver.spans])


async def test_without_tracing_providers_and_sandboxes_are_handed_out_bare(tmp_path: Path) -> None:
    """Tracing off costs a model call or a command nothing: no wrapper around them at all."""
    from runtime.providers.scripted import ScriptedProvider
    from runtime.sandbox.local import LocalSandbox

    assert type(ProviderRegistry(tmp_path, env=ENV["scripted"]).get()) is ScriptedProvider
    registry = SandboxRegistry(tmp_path, use_bwrap=False)
    try:
        assert type(await registry.get(Placement(backend="local", workspace="w"))) is LocalSandbox
    finally:
        await registry.aclose()
