"""The ``anthropic`` provider: the official anthropic SDK against the Messages API (or a compatible endpoint).

Sessions hold OpenAI-shaped chunks; here they become Anthropic content blocks: ``system`` chunks
join the top-level system prompt, assistant tool calls become ``tool_use`` blocks, and
``tool_result`` chunks become ``tool_result`` blocks in a user turn (consecutive ones share a turn,
as the API wants). Streaming follows the SSE event sequence (message_start, content_block_*,
message_delta, message_stop).
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2

from runtime.providers.base import (
    DeltaCallback,
    ModelRequest,
    ModelResponse,
    arguments_object,
    block_turns,
    safe_url,
    usage_of,
)
from runtime.providers.retry import (
    RetryPolicy,
    complete_with_retries,
)
from runtime.sessions.model import Chunk, ToolCall, ToolCallFunction
from runtime.telemetry import Tracing

_STOP = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
DEFAULT_MAX_TOKENS = 1024


def _is_error_result(content: str) -> bool:
    """Whether a tool result is the agent's typed error (``{"error": {"type": ..., "message": ...}}``)."""
    if not content.startswith('{"error"'):
        return False
    try:
        error = json.loads(content).get("error")
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and "type" in error and "message" in error


def to_anthropic(request: ModelRequest) -> tuple[str | None, list[dict[str, Any]]]:
    """The system text and the alternating user/assistant turns of a request."""
    system, turns = block_turns(request, _blocks)
    return ("\n\n".join(system) or None), turns


def _blocks(chunk: Chunk) -> list[dict[str, Any]]:
    if chunk.kind == "tool_result":
        block = {"type": "tool_result", "tool_use_id": chunk.tool_call_id or "", "content": chunk.content}
        return [{**block, "is_error": True} if _is_error_result(chunk.content) else block]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": chunk.content}] if chunk.content else []
    for tc in chunk.tool_calls or ():
        args = arguments_object(tc.function.arguments)
        blocks.append({"type": "tool_use", "id": tc.id, "name": tc.function.name, "input": args})
    return blocks


class AnthropicProvider:
    """Messages through ``anthropic.AsyncAnthropic``; the API key is held by the SDK client only."""

    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        model: str = "claude-3-5-haiku-latest",
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        max_tokens: int | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        """``tracing``: each call sends the current span's W3C ``traceparent`` (none when off)."""
        self.model = model
        self._tracing = tracing or Tracing()
        self.retry = retry or RetryPolicy()
        self.max_tokens = max_tokens or DEFAULT_MAX_TOKENS
        self._secret = api_key
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0)

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, base_url={safe_url(self._client.base_url)!r})"

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(self, request: ModelRequest, *, on_delta: DeltaCallback | None = None) -> ModelResponse:
        system, turns = to_anthropic(request)
        kwargs: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": request.max_tokens or self.max_tokens,
            "messages": turns,
        }
        if system:
            kwargs["system"] = system
        if request.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
            ]
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if trace_headers := self._tracing.headers():  # the model call's span, as the vendor sees it
            kwargs["extra_headers"] = trace_headers

        return await complete_with_retries(
            self.name,
            lambda: self._plain(kwargs),
            lambda relay: self._streamed(kwargs, relay),
            on_delta,
            policy=self.retry,
            secret=self._secret,
            errors=(anthropic.APIError, httpx2.HTTPError),  # a stream cut mid-way surfaces as httpx2's error
            connection_errors=(anthropic.APIConnectionError, httpx2.HTTPError),
            url=safe_url(str(self._client.base_url).rstrip("/") + "/v1/messages"),
        )

    async def _plain(self, kwargs: dict[str, Any]) -> ModelResponse:
        msg = await self._client.messages.create(**kwargs)
        text: list[str] = []
        calls: list[ToolCall] = []
        for block in msg.content:
            if block.type == "text":
                text.append(block.text)
            elif block.type == "tool_use":
                args = json.dumps(block.input)
                calls.append(ToolCall(id=block.id, function=ToolCallFunction(name=block.name, arguments=args)))
        return ModelResponse(
            content="".join(text),
            tool_calls=calls,
            usage=usage_of(msg.usage.input_tokens, msg.usage.output_tokens),
            stop_reason=_STOP.get(msg.stop_reason or "", "other"),
            model=msg.model,
        )

    async def _streamed(self, kwargs: dict[str, Any], on_delta: DeltaCallback) -> ModelResponse:
        stream = await self._client.messages.create(**kwargs, stream=True)
        text: list[str] = []
        tools: dict[int, dict[str, str]] = {}
        prompt = completion = 0
        stop, model = "", kwargs["model"]
        async with stream:
            async for event in stream:
                if event.type == "message_start":
                    model = event.message.model
                    prompt = event.message.usage.input_tokens
                    completion = event.message.usage.output_tokens
                elif event.type == "content_block_start" and event.content_block.type == "tool_use":
                    block = event.content_block
                    tools[event.index] = {"id": block.id, "name": block.name, "json": ""}
                elif event.type == "content_block_delta":
                    if event.delta.type == "text_delta":
                        text.append(event.delta.text)
                        await on_delta(event.delta.text)
                    elif event.delta.type == "input_json_delta" and event.index in tools:
                        tools[event.index]["json"] += event.delta.partial_json
                elif event.type == "message_delta":
                    stop = event.delta.stop_reason or stop
                    completion = event.usage.output_tokens
        calls = [
            ToolCall(id=t["id"], function=ToolCallFunction(name=t["name"], arguments=t["json"] or "{}"))
            for _, t in sorted(tools.items())
        ]
        return ModelResponse("".join(text), calls, usage_of(prompt, completion), _STOP.get(stop, "other"), model)
