"""The agent loop over the real vendor SDKs: a local server speaking each wire format plays the model."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from runtime import Runtime
from runtime.flow.agent import Agent
from runtime.flow.tools import sandbox_tools
from runtime.providers import AnthropicProvider, OpenAIProvider
from runtime.sandbox.local import LocalSandbox
from tests.fakes.model_server import FakeModelServer, Reply, serve


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    with serve(FakeModelServer()) as server:
        yield server


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_agent_streams_over_the_wire_calls_tools_and_answers(
    rt: Runtime, sandbox: LocalSandbox, model_server: FakeModelServer, kind: str
) -> None:
    model_server.add(
        Reply("Writing it.", [("call_w", "write_file", {"path": "n.txt", "content": "wire ok"})], 40, 12),
        Reply("", [("call_r", "run_command", {"command": "cat n.txt"})], 60, 9),
        Reply("The file says: wire ok", prompt_tokens=80, completion_tokens=6),
    )
    provider: OpenAIProvider | AnthropicProvider
    if kind == "openai":
        provider = OpenAIProvider(api_key="sk-wire-0000", base_url=model_server.url + "/v1", model="m")
    else:
        provider = AnthropicProvider(api_key="sk-wire-0000", base_url=model_server.url, model="m")
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    start = await rt.sessions.create([{"kind": "user", "content": "Write n.txt and read it."}])
    try:
        result = await Agent("sys", provider, sandbox_tools(sandbox), on_delta=on_delta).run(rt, start.id)
    finally:
        await provider.aclose()

    assert result.answer == "The file says: wire ok" and result.rounds == 3
    assert "".join(deltas) == "Writing it.The file says: wire ok"
    session = await rt.sessions.get(result.session.id)
    assert json.loads(session.chunks[4].content)["stdout"] == "wire ok"
    assert session.usage.total_tokens == 40 + 12 + 60 + 9 + 80 + 6
    # The third request carried the whole exchange back in the vendor's shape.
    last = model_server.received[2].body["messages"]
    if kind == "openai":
        assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool"]
        assert last[3]["tool_call_id"] == "call_w"
    else:
        assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
        assert last[2]["content"][0]["tool_use_id"] == "call_w"
