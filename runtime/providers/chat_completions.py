"""The OpenAI chat-completions format, as the ``openai`` and ``litellm`` providers both speak it.

A ``ModelRequest`` becomes a call's arguments: chunks map one to one onto chat messages
(``tool_result`` becomes a ``tool`` message), tools onto ``function`` tools, and the model, token
limit, temperature and trace header are added the same way for both. A reply, whole or streamed,
becomes a ``ModelResponse``: text, tool calls (stitched together by index when streamed), usage (the
final ``include_usage`` chunk when streamed) and the finish reason. The openai SDK's reply objects and
LiteLLM's have the same shape; where LiteLLM's may leave a field out (usage, a tool call's index or
type, the model), the reader takes what is there.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

from runtime.providers.base import DeltaCallback, ModelRequest, ModelResponse, ProviderError, usage_of
from runtime.sessions.model import Chunk, ToolCall, ToolCallFunction

FINISH = {"stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls", "length": "length"}


def to_openai_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The request as chat-completions messages, system prompt first."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for chunk in request.messages:
        out.append(_message(chunk))
    return out


def _message(chunk: Chunk) -> dict[str, Any]:
    if chunk.kind == "tool_result":
        return {"role": "tool", "tool_call_id": chunk.tool_call_id or "", "content": chunk.content}
    if chunk.kind == "assistant" and chunk.tool_calls:
        return {
            "role": "assistant",
            "content": chunk.content or None,
            "tool_calls": [tc.model_dump(mode="json") for tc in chunk.tool_calls],
        }
    message: dict[str, Any] = {"role": chunk.kind, "content": chunk.content}
    if chunk.name and chunk.kind == "user":
        message["name"] = chunk.name
    return message


def to_openai_tools(request: ModelRequest) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in request.tools
    ]


def request_kwargs(
    request: ModelRequest, *, model: str, max_tokens: int | None, trace_headers: dict[str, str]
) -> dict[str, Any]:
    """The arguments of a chat-completions call for ``request`` that every provider speaking the format
    sends: ``model`` and ``max_tokens`` are the provider's defaults (the request's own win),
    ``trace_headers`` the model call's span as the vendor sees it (none when tracing is off)."""
    kwargs: dict[str, Any] = {"model": request.model or model, "messages": to_openai_messages(request)}
    if request.tools:
        kwargs["tools"] = to_openai_tools(request)
    max_tokens = request.max_tokens or max_tokens
    if max_tokens:
        kwargs["max_tokens"] = max_tokens
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    if trace_headers:
        kwargs["extra_headers"] = trace_headers
    return kwargs


def read_reply(resp: Any, provider: str, model: str) -> ModelResponse:
    """A whole (not streamed) reply; ``model`` is the one asked for, named when the reply names none."""
    if not resp.choices:
        raise ProviderError(f"{provider}: the response has no choices", provider=provider)
    choice = resp.choices[0]
    calls = [
        ToolCall(id=tc.id, function=ToolCallFunction(name=tc.function.name, arguments=tc.function.arguments or "{}"))
        for tc in (choice.message.tool_calls or [])
        if getattr(tc, "type", None) in (None, "function")  # a custom tool call has no function to call
    ]
    u = getattr(resp, "usage", None)
    return ModelResponse(
        content=choice.message.content or "",
        tool_calls=calls,
        usage=usage_of(u.prompt_tokens if u else 0, u.completion_tokens if u else 0),
        stop_reason=FINISH.get(choice.finish_reason or "", "other"),
        model=resp.model or model,
    )


async def read_stream(stream: AsyncIterable[Any], on_delta: DeltaCallback, model: str) -> ModelResponse:
    """A streamed reply, its text passed to ``on_delta`` as it arrives; ``model`` as for ``read_reply``."""
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish, usage = "", usage_of(0, 0)
    async for event in stream:
        model = event.model or model
        u = getattr(event, "usage", None)
        if u is not None and (
            u.prompt_tokens or u.completion_tokens
        ):  # zeros count nothing: the final chunk's usage stays
            usage = usage_of(u.prompt_tokens, u.completion_tokens)
        for choice in event.choices:
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
                await on_delta(delta.content)
            for tc in delta.tool_calls or []:
                slot = calls.setdefault(tc.index or 0, {"id": "", "name": "", "arguments": ""})
                slot["id"] = tc.id or slot["id"]
                if tc.function is not None:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
            finish = choice.finish_reason or finish
    tool_calls = [
        ToolCall(id=c["id"], function=ToolCallFunction(name=c["name"], arguments=c["arguments"] or "{}"))
        for _, c in sorted(calls.items())
    ]
    return ModelResponse("".join(text), tool_calls, usage, FINISH.get(finish, "other"), model)
