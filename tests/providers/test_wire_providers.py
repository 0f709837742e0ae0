"""The openai and anthropic providers drive the real SDKs against a local server speaking each wire format."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import anyio
import pytest

from runtime.providers import AnthropicProvider, ModelRequest, OpenAIProvider, ProviderError, RetryPolicy, ToolSpec
from runtime.sessions.model import Chunk, ToolCall, ToolCallFunction
from tests.fakes.model_server import Failure, FakeModelServer, Reply

SECRET = "sk-test-DO-NOT-LEAK-42"
FAST = RetryPolicy(max_retries=2, base_delay_s=0.01)
KINDS = ["openai", "anthropic"]

WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


Wire = OpenAIProvider | AnthropicProvider
Make = Callable[..., Wire]


@pytest.fixture
async def make() -> AsyncIterator[Make]:
    """Build providers against a server; their SDK clients are closed after the test."""
    built: list[Wire] = []

    def build(kind: str, server: FakeModelServer, retry: RetryPolicy = FAST, timeout_s: float = 10.0) -> Wire:
        provider: Wire
        if kind == "openai":
            url = server.url + "/v1"
            provider = OpenAIProvider(api_key=SECRET, base_url=url, model="gpt-test", retry=retry, timeout_s=timeout_s)
        else:
            url = server.url
            provider = AnthropicProvider(
                api_key=SECRET, base_url=url, model="claude-test", retry=retry, timeout_s=timeout_s
            )
        built.append(provider)
        return provider

    yield build
    for provider in built:
        await provider.aclose()


def ask(text: str = "What is the weather in Paris?") -> ModelRequest:
    return ModelRequest(messages=[Chunk(kind="user", content=text)], system="You are terse.", tools=[WEATHER])


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_text_reply_has_content_usage_and_model(
    model_server: FakeModelServer, make: Make, kind: str, stream: bool
) -> None:
    model_server.add(Reply("It is sunny in Paris today.", prompt_tokens=21, completion_tokens=9))
    provider = make(kind, model_server)
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    response = await provider.complete(ask(), on_delta=on_delta if stream else None)
    assert response.content == "It is sunny in Paris today."
    assert response.tool_calls == []
    assert response.stop_reason == "stop"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.total_tokens) == (21, 9, 30)
    assert response.model == ("gpt-test" if kind == "openai" else "claude-test")
    if stream:
        assert len(deltas) > 1 and "".join(deltas) == response.content
    assert model_server.received[0].body.get("stream", False) is stream


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_tool_calls_come_back_in_openai_shape(
    model_server: FakeModelServer, make: Make, kind: str, stream: bool
) -> None:
    model_server.add(
        Reply(
            "Let me check.",
            [("call_a", "get_weather", {"city": "Paris"}), ("call_b", "get_weather", {"city": "Tokyo, Japan"})],
        )
    )
    provider = make(kind, model_server)
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    response = await provider.complete(ask(), on_delta=on_delta if stream else None)
    assert response.stop_reason == "tool_calls"
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in response.tool_calls] == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "get_weather", {"city": "Tokyo, Japan"}),
    ]
    assert response.content == "Let me check."
    body = model_server.received[0].body
    if kind == "openai":
        assert body["tools"][0]["function"]["parameters"] == WEATHER.parameters
        assert body["messages"][0] == {"role": "system", "content": "You are terse."}
    else:
        assert body["tools"][0]["input_schema"] == WEATHER.parameters
        assert body["system"] == "You are terse."


def _history() -> ModelRequest:
    call = ToolCall(id="call_1", function=ToolCallFunction(name="get_weather", arguments='{"city": "Oslo"}'))
    return ModelRequest(
        messages=[
            Chunk(kind="system", content="Answer in English."),
            Chunk(kind="user", content="Weather in Oslo?"),
            Chunk(kind="assistant", content="", tool_calls=(call,)),
            Chunk(kind="tool_result", content="snow, -3C", tool_call_id="call_1", name="get_weather"),
        ],
        system="You are terse.",
        tools=[WEATHER],
    )


@pytest.mark.anyio
async def test_openai_history_maps_tool_results_to_tool_messages(model_server: FakeModelServer, make: Make) -> None:
    model_server.add(Reply("Snowy."))
    await make("openai", model_server).complete(_history())
    messages = model_server.received[0].body["messages"]
    assert [m["role"] for m in messages] == ["system", "system", "user", "assistant", "tool"]
    assert messages[3]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    assert messages[4] == {"role": "tool", "tool_call_id": "call_1", "content": "snow, -3C"}


@pytest.mark.anyio
async def test_anthropic_history_maps_tool_results_to_user_blocks(model_server: FakeModelServer, make: Make) -> None:
    model_server.add(Reply("Snowy."))
    await make("anthropic", model_server).complete(_history())
    body = model_server.received[0].body
    assert body["system"] == "You are terse.\n\nAnswer in English."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}
    ]
    assert body["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "call_1", "content": "snow, -3C"}]


@pytest.mark.anyio
async def test_anthropic_marks_typed_tool_errors_is_error(model_server: FakeModelServer, make: Make) -> None:
    model_server.add(Reply("Sorry."))
    failed = '{"error": {"type": "execution_error", "message": "no network", "tool": "get_weather"}}'
    request = _history()
    request.messages[-1] = Chunk(kind="tool_result", content=failed, tool_call_id="call_1", name="get_weather")
    await make("anthropic", model_server).complete(request)
    (block,) = model_server.received[0].body["messages"][2]["content"]
    assert block["is_error"] is True and block["content"] == failed


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [429, 503])
async def test_retryable_failures_are_retried_then_succeed(
    model_server: FakeModelServer, make: Make, kind: str, status: int
) -> None:
    model_server.add(Failure(status, retry_after="0"), Failure(status), Reply("finally"))
    response = await make(kind, model_server).complete(ask())
    assert response.content == "finally"
    assert len(model_server.received) == 3


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_retries_give_up_with_a_provider_error(model_server: FakeModelServer, make: Make, kind: str) -> None:
    model_server.add(Failure(503), Failure(503), Failure(503), Reply("too late"))
    with pytest.raises(ProviderError) as info:
        await make(kind, model_server).complete(ask())
    assert info.value.status == 503 and info.value.retryable
    assert "gave up after 3 attempts" in str(info.value)
    assert len(model_server.received) == 3


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_client_errors_are_not_retried_and_never_show_the_key(
    model_server: FakeModelServer, make: Make, kind: str
) -> None:
    model_server.add(Failure(401, f"Incorrect API key provided: {SECRET}"))
    provider = make(kind, model_server)
    with pytest.raises(ProviderError) as info:
        await provider.complete(ask())
    assert info.value.status == 401 and not info.value.retryable
    assert SECRET not in str(info.value) and "***" in str(info.value)
    assert SECRET not in repr(provider)
    assert len(model_server.received) == 1
    assert SECRET in model_server.received[0].headers.get("authorization", "") + model_server.received[0].headers.get(
        "x-api-key", ""
    )


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_connection_refused_is_a_provider_error(make: Make, kind: str) -> None:
    dead = FakeModelServer()
    dead.url = "http://127.0.0.1:9"  # discard port: nothing listens
    with pytest.raises(ProviderError) as info:
        await make(kind, dead, RetryPolicy(max_retries=1, base_delay_s=0.0)).complete(ask())
    assert info.value.retryable and info.value.status is None
    endpoint = "/v1/chat/completions" if kind == "openai" else "/v1/messages"
    assert f"the connection to http://127.0.0.1:9{endpoint} failed" in str(info.value)  # the URL it tried


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_a_stream_cut_before_any_text_is_retried(model_server: FakeModelServer, make: Make, kind: str) -> None:
    model_server.add(Reply("never seen", cut_after=1), Reply("second try"))
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    response = await make(kind, model_server).complete(ask(), on_delta=on_delta)
    assert response.content == "second try" and "".join(deltas) == "second try"
    assert len(model_server.received) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_a_stream_cut_after_text_is_an_error_not_a_retry(
    model_server: FakeModelServer, make: Make, kind: str
) -> None:
    model_server.add(Reply("hello there friends", cut_after=3), Reply("must not be used"))
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    with pytest.raises(ProviderError, match="stream broke after text had been streamed, so it was not retried"):
        await make(kind, model_server).complete(ask(), on_delta=on_delta)
    assert deltas and "".join(deltas) != "hello there friends"
    assert len(model_server.received) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_a_server_slower_than_the_timeout_is_a_provider_error(
    model_server: FakeModelServer, make: Make, kind: str
) -> None:
    model_server.add(Reply("too slow", delay_s=1.0))
    provider = make(kind, model_server, RetryPolicy(max_retries=0), timeout_s=0.2)
    with anyio.fail_after(5), pytest.raises(ProviderError, match=r"timed out.*gave up after 1 attempt\)") as info:
        await provider.complete(ask())
    assert info.value.retryable
