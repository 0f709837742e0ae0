"""The ``litellm`` provider drives the real LiteLLM client against the local OpenAI-wire server (not its mock mode).

The model is named as LiteLLM takes it, ``openai/gpt-test``: LiteLLM routes it to the OpenAI
chat-completions API at the given base URL, i.e. tests/fakes/model_server.py, which records what
arrived on the wire and answers plain or streamed (SSE) as the vendor does.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from runtime import Runtime
from runtime.extras import MissingExtraError
from runtime.providers import ModelRequest, ProviderConfigError, RetryPolicy, ToolSpec, load_provider
from runtime.providers.config import configuration_problem
from runtime.providers.litellm_provider import LiteLLMProvider
from runtime.sessions.model import Chunk, ToolCall, ToolCallFunction
from tests.fakes.model_server import Failure, FakeModelServer, Reply

pytestmark = [
    pytest.mark.anyio,
    # pydantic warns about LiteLLM's own types while it streams (ReadOnly TypedDict items, deprecated
    # attributes); the suite makes warnings errors, and LiteLLM turns an error inside a stream into a failure
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]
SECRET = "sk-litellm-DO-NOT-LEAK-7"
FAST = RetryPolicy(max_retries=2, base_delay_s=0.01)
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
Make = Callable[[FakeModelServer], LiteLLMProvider]


@pytest.fixture
async def make() -> AsyncIterator[Make]:
    def build(server: FakeModelServer) -> LiteLLMProvider:
        return LiteLLMProvider(model="openai/gpt-test", api_key=SECRET, base_url=server.url + "/v1", retry=FAST)

    yield build


def ask(text: str = "What is the weather in Paris?") -> ModelRequest:
    return ModelRequest(messages=[Chunk(kind="user", content=text)], system="You are terse.", tools=[WEATHER])


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_text_reply_has_content_usage_and_model(model_server: FakeModelServer, make: Make, stream: bool) -> None:
    model_server.add(Reply("It is sunny in Paris today.", prompt_tokens=21, completion_tokens=9))
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    response = await make(model_server).complete(ask(), on_delta=on_delta if stream else None)
    assert response.content == "It is sunny in Paris today."
    assert response.tool_calls == [] and response.stop_reason == "stop"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.total_tokens) == (21, 9, 30)
    assert response.model.endswith("gpt-test")
    if stream:
        assert len(deltas) > 1 and "".join(deltas) == response.content
    sent = model_server.received[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "gpt-test"  # LiteLLM took the provider prefix off
    assert sent.body.get("stream", False) is stream
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert sent.body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert sent.body["tools"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_tool_calls_come_back_and_go_out_in_the_openai_shape(
    model_server: FakeModelServer, make: Make, stream: bool
) -> None:
    model_server.add(Reply(tool_calls=[("call_1", "get_weather", {"city": "Paris"}), ("call_2", "get_weather", {})]))
    model_server.add(Reply("Sunny."))
    provider = make(model_server)

    async def on_delta(text: str) -> None:
        return None

    first = await provider.complete(ask(), on_delta=on_delta if stream else None)
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in first.tool_calls] == [
        ("call_1", "get_weather", {"city": "Paris"}),
        ("call_2", "get_weather", {}),
    ]
    assert first.stop_reason == "tool_calls"
    call = ToolCall(id="call_1", function=ToolCallFunction(name="get_weather", arguments='{"city": "Paris"}'))
    history = [
        Chunk(kind="user", content="weather?"),
        Chunk(kind="assistant", content="", tool_calls=(call,)),
        Chunk(kind="tool_result", content="sunny", tool_call_id="call_1", name="get_weather"),
    ]
    second = await provider.complete(ModelRequest(messages=history, tools=[WEATHER]))
    assert second.content == "Sunny."
    messages = model_server.received[1].body["messages"]
    assert messages[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}


async def test_a_failure_is_retried_then_reported_without_the_key(model_server: FakeModelServer, make: Make) -> None:
    model_server.add(Failure(503, "overloaded"), Reply("ok"))
    assert (await make(model_server).complete(ask())).content == "ok"
    assert len(model_server.received) == 2  # LiteLLM's own retries are off: ours made the second attempt
    model_server.add(Failure(400, f"bad request for key {SECRET}"))
    with pytest.raises(Exception) as caught:
        await make(model_server).complete(ask())
    text = str(caught.value)
    assert "litellm" in text and "HTTP 400" in text and SECRET not in text


def test_configuration_names_the_model_and_the_missing_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_server: FakeModelServer
) -> None:
    with pytest.raises(ProviderConfigError, match="needs a model named as LiteLLM takes it, provider/model"):
        load_provider("litellm", tmp_path, env={})
    env = {"RATH_PROVIDER": "litellm", "LITELLM_MODEL": "openai/gpt-test", "LITELLM_API_BASE": model_server.url}
    assert configuration_problem(tmp_path, env) is None  # no key needed: LiteLLM reads the vendor's own variables
    provider = load_provider(None, tmp_path, env=env)
    assert isinstance(provider, LiteLLMProvider) and provider.model == "openai/gpt-test"
    monkeypatch.setitem(sys.modules, "litellm", None)  # as if the extra were not installed
    with pytest.raises(MissingExtraError, match=r"pip install 'rath-mcp\[litellm\]'"):
        load_provider(None, tmp_path, env=env)


def test_the_start_up_check_says_in_one_line_that_the_extra_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``serve`` prints at start-up: the package is looked for, not imported (that takes seconds)."""
    (tmp_path / "config.json").write_text(
        json.dumps({"provider": "litellm", "providers": {"litellm": {"model": "x/y"}}})
    )
    monkeypatch.setitem(sys.modules, "litellm", None)  # as if the extra were not installed
    assert configuration_problem(tmp_path) == (
        "model provider misconfigured: the litellm model provider (RATH_PROVIDER=litellm, models named provider/model) "
        "needs the 'litellm' extra, which is not installed (no module 'litellm'): pip install 'rath-mcp[litellm]'"
    )


async def test_the_agent_workflow_runs_on_litellm_and_streams_its_text(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """Chosen in config.json like any provider: a run's answer streams as step.text events."""
    model_server.add(Reply("Bonjour from the model."))
    settings = {"model": "openai/gpt-test", "base_url": model_server.url + "/v1", "api_key": SECRET}
    (tmp_path / "config.json").write_text(json.dumps({"provider": "litellm", "providers": {"litellm": settings}}))
    async with Runtime.open(tmp_path) as rt:
        run = await rt.runs.start("agent", input={"message": "greet me", "tools": False, "memory": False})
        done = await rt.runs.wait(run.id, 60)
        assert done.status == "succeeded", done.error
        assert done.result is not None and done.result["answer"] == "Bonjour from the model."
        pieces = [e.data["text"] for e in await rt.runs.events(run.id, 0, 500) if e.type == "step.text"]
        assert len(pieces) > 1 and "".join(pieces) == "Bonjour from the model."
    assert model_server.received[0].body["stream"] is True
