"""The ``sampling`` provider: a hook the MCP layer fills with the connected client's own model.

The runtime knows nothing of MCP, so this provider only holds a callback. The MCP adapter builds it
with a function that sends the request as ``sampling/createMessage`` to the client and turns the
answer back into a ``ModelResponse``; the two helpers here do the shape conversion on plain JSON
(the wire format, camelCase), so the adapter only validates and sends::

    async def callback(request: ModelRequest) -> ModelResponse:
        params = sampling_params(request, with_tools=client_can_use_tools)
        result = await session.create_message(**CreateMessageRequestParams.model_validate(params)...)
        return response_from_sampling(result.model_dump(by_alias=True, mode="json"), request)

    rt.providers.register("sampling", SamplingProvider(callback))

Clients offer no streaming for sampling, so ``on_delta`` receives the whole text once. Sampling
results carry no token counts; usage is estimated (about four characters a token).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from runtime.providers.base import (
    DeltaCallback,
    ModelRequest,
    ModelResponse,
    ProviderError,
    arguments_object,
    block_turns,
    estimate_prompt_tokens,
    estimate_tokens,
    usage_of,
)
from runtime.sessions.model import Chunk, ToolCall, ToolCallFunction

SamplingCallback = Callable[[ModelRequest], Awaitable[ModelResponse]]


class NoSamplingClient(ProviderError):
    """Raised by a sampling callback when no connected client offers sampling at all.

    Distinct from other sampling failures so that the default provider (used when nothing is
    configured) can answer it with how to configure a model instead.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, provider="sampling")


DEFAULT_MAX_TOKENS = 1024
_STOP = {"endTurn": "stop", "stopSequence": "stop", "toolUse": "tool_calls", "maxTokens": "length"}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _content(chunk: Chunk, with_tools: bool) -> list[dict[str, Any]]:
    if chunk.kind == "tool_result":
        if with_tools:
            return [{"type": "tool_result", "toolUseId": chunk.tool_call_id or "", "content": [_text(chunk.content)]}]
        return [_text(f"[result of tool {chunk.name or '?'}]\n{chunk.content}")]
    blocks = [_text(chunk.content)] if chunk.content else []
    for call in chunk.tool_calls or ():
        if with_tools:
            args = arguments_object(call.function.arguments)
            blocks.append({"type": "tool_use", "id": call.id, "name": call.function.name, "input": args})
        else:
            blocks.append(_text(f"[called tool {call.function.name} with {call.function.arguments}]"))
    return blocks


def sampling_params(request: ModelRequest, *, with_tools: bool = False) -> dict[str, Any]:
    """A ``sampling/createMessage`` params object (JSON, camelCase) for ``request``.

    ``system`` chunks join the system prompt; consecutive same-role chunks share one message.
    Without ``with_tools`` (clients lacking the ``sampling.tools`` capability) tool calls and
    results are written out as text and no tools are offered.
    """
    system, messages = block_turns(request, lambda chunk: _content(chunk, with_tools))
    params: dict[str, Any] = {"messages": messages, "maxTokens": request.max_tokens or DEFAULT_MAX_TOKENS}
    if system:
        params["systemPrompt"] = "\n\n".join(system)
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if with_tools and request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "inputSchema": t.parameters} for t in request.tools
        ]
    return params


def response_from_sampling(result: dict[str, Any], request: ModelRequest) -> ModelResponse:
    """A ``CreateMessageResult`` (JSON, camelCase; single block or a list) as a ``ModelResponse``."""
    content = result.get("content")
    blocks = content if isinstance(content, list) else [content] if isinstance(content, dict) else []
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            arguments = json.dumps(block.get("input") or {})
            calls.append(
                ToolCall(
                    id=str(block.get("id")), function=ToolCallFunction(name=str(block["name"]), arguments=arguments)
                )
            )
    text = "".join(texts)
    stop = _STOP.get(str(result.get("stopReason")), "tool_calls" if calls else "stop")
    usage = usage_of(estimate_prompt_tokens(request), estimate_tokens(text))
    return ModelResponse(text, calls, usage, stop, str(result.get("model") or "sampling"))


class SamplingProvider:
    """A provider that asks whoever filled ``callback`` (the MCP client's model) to answer."""

    name = "sampling"

    def __init__(self, callback: SamplingCallback) -> None:
        self._callback = callback

    def __repr__(self) -> str:
        return "SamplingProvider()"

    async def complete(self, request: ModelRequest, *, on_delta: DeltaCallback | None = None) -> ModelResponse:
        response = await self._callback(request)
        if not isinstance(response, ModelResponse):
            raise ProviderError(
                f"sampling: the callback returned {type(response).__name__}, expected a ModelResponse",
                provider=self.name,
            )
        if on_delta is not None and response.content:
            await on_delta(response.content)
        return response
