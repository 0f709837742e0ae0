"""The sampling hook's shape helpers produce and read the MCP wire format (checked with the SDK's own models)."""

from __future__ import annotations

import json

import mcp_types
import pytest

from runtime.providers import ModelRequest, ModelResponse, ProviderError, SamplingProvider, ToolSpec
from runtime.providers.sampling import response_from_sampling, sampling_params
from runtime.sessions.model import Chunk, ToolCall, ToolCallFunction

CALL = ToolCall(id="call_1", function=ToolCallFunction(name="lookup", arguments='{"q": "tides"}'))
REQUEST = ModelRequest(
    messages=[
        Chunk(kind="system", content="Be brief."),
        Chunk(kind="user", content="When is high tide?"),
        Chunk(kind="assistant", content="Checking.", tool_calls=(CALL,)),
        Chunk(kind="tool_result", content="06:12", tool_call_id="call_1", name="lookup"),
    ],
    system="You are a harbour guide.",
    tools=[ToolSpec("lookup", "Look a fact up", {"type": "object", "properties": {"q": {"type": "string"}}})],
    temperature=0.0,
)


def test_params_with_tools_validate_as_create_message_params() -> None:
    params = sampling_params(REQUEST, with_tools=True)
    model = mcp_types.CreateMessageRequestParams.model_validate(params)
    assert model.system_prompt == "You are a harbour guide.\n\nBe brief."
    assert [m.role for m in model.messages] == ["user", "assistant", "user"]
    use = model.messages[1].content_as_list[1]
    assert isinstance(use, mcp_types.ToolUseContent) and use.input == {"q": "tides"} and use.id == "call_1"
    result = model.messages[2].content_as_list[0]
    assert isinstance(result, mcp_types.ToolResultContent) and result.tool_use_id == "call_1"
    assert model.tools is not None and model.tools[0].input_schema["properties"] == {"q": {"type": "string"}}
    assert model.max_tokens == 1024 and model.temperature == 0.0


def test_params_without_tools_spell_tool_traffic_out_as_text() -> None:
    model = mcp_types.CreateMessageRequestParams.model_validate(sampling_params(REQUEST))
    assert model.tools is None
    texts = [b.text for m in model.messages for b in m.content_as_list if isinstance(b, mcp_types.TextContent)]
    assert '[called tool lookup with {"q": "tides"}]' in texts and "[result of tool lookup]\n06:12" in texts


def test_a_history_call_with_malformed_arguments_is_still_sent_with_tools() -> None:
    # The agent keeps such a call in the session (answered by an invalid_arguments result); the
    # next sampling request must still be built, as the anthropic provider builds it.
    bad = ToolCall(id="call_2", function=ToolCallFunction(name="lookup", arguments='{"q": "tid'))
    listed = ToolCall(id="call_3", function=ToolCallFunction(name="lookup", arguments="[1]"))
    request = ModelRequest(
        [Chunk(kind="user", content="Tides?"), Chunk(kind="assistant", content="", tool_calls=(bad, listed))]
    )
    model = mcp_types.CreateMessageRequestParams.model_validate(sampling_params(request, with_tools=True))
    uses = model.messages[1].content_as_list
    assert [u.input for u in uses if isinstance(u, mcp_types.ToolUseContent)] == [
        {"_unparsed": '{"q": "tid'},
        {"_value": [1]},
    ]


def test_results_are_read_back_single_block_or_list() -> None:
    plain = mcp_types.CreateMessageResult(
        role="assistant",
        content=mcp_types.TextContent(type="text", text="At 06:12."),
        model="host-model",
        stop_reason="endTurn",
    )
    response = response_from_sampling(plain.model_dump(by_alias=True, mode="json"), REQUEST)
    assert (response.content, response.stop_reason, response.model, response.tool_calls) == (
        "At 06:12.",
        "stop",
        "host-model",
        [],
    )
    assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
    with_tool = mcp_types.CreateMessageResultWithTools(
        role="assistant",
        content=[
            mcp_types.TextContent(type="text", text="Let me look."),
            mcp_types.ToolUseContent(type="tool_use", id="tu_9", name="lookup", input={"q": "moon"}),
        ],
        model="host-model",
        stop_reason="toolUse",
    )
    response = response_from_sampling(with_tool.model_dump(by_alias=True, mode="json"), REQUEST)
    assert response.stop_reason == "tool_calls" and response.content == "Let me look."
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in response.tool_calls] == [
        ("tu_9", "lookup", {"q": "moon"})
    ]


@pytest.mark.anyio
async def test_a_callback_returning_the_wrong_type_is_a_provider_error() -> None:
    async def wrong(request: ModelRequest) -> ModelResponse:
        return "text"  # type: ignore[return-value]

    with pytest.raises(ProviderError, match="expected a ModelResponse"):
        await SamplingProvider(wrong).complete(REQUEST)
