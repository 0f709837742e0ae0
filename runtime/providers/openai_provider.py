"""The ``openai`` provider: the official openai SDK against any OpenAI-compatible chat-completions endpoint.

Chunks map one to one onto chat messages (``tool_result`` becomes a ``tool`` message). Without
``on_delta`` the call is a plain request; with it the call streams (SSE) and text deltas are passed
on as they arrive, tool-call fragments are stitched together by index, and usage comes from the
final ``include_usage`` chunk.
"""

from __future__ import annotations

from typing import Any

import httpx2
import openai

from runtime.providers.base import (
    DeltaCallback,
    ModelRequest,
    ModelResponse,
    ProviderError,
    safe_url,
    usage_of,
)
from runtime.providers.retry import (
    RetryPolicy,
    complete_with_retries,
)
from runtime.sessions.model import Chunk, ToolCall, ToolCallFunction
from runtime.telemetry import Tracing

_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls", "length": "length"}


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


class OpenAIProvider:
    """Chat completions through ``openai.AsyncOpenAI``; the API key is held by the SDK client only."""

    name = "openai"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        model: str = "gpt-4o-mini",
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        max_tokens: int | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        """``tracing``: each call sends the current span's W3C ``traceparent`` (none when off)."""
        self.model = model
        self._tracing = tracing or Tracing()
        self.retry = retry or RetryPolicy()
        self.max_tokens = max_tokens
        self._secret = api_key
        self._client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0)

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={safe_url(self._client.base_url)!r})"

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(self, request: ModelRequest, *, on_delta: DeltaCallback | None = None) -> ModelResponse:
        kwargs: dict[str, Any] = {"model": request.model or self.model, "messages": to_openai_messages(request)}
        if request.tools:
            kwargs["tools"] = to_openai_tools(request)
        max_tokens = request.max_tokens or self.max_tokens
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
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
            errors=(openai.APIError, httpx2.HTTPError),  # a stream cut mid-way surfaces as httpx2's error
            connection_errors=(openai.APIConnectionError, httpx2.HTTPError),
            url=safe_url(str(self._client.base_url).rstrip("/") + "/chat/completions"),
        )

    async def _plain(self, kwargs: dict[str, Any]) -> ModelResponse:
        resp = await self._client.chat.completions.create(**kwargs)
        if not resp.choices:
            raise ProviderError("openai: the response has no choices", provider=self.name)
        choice = resp.choices[0]
        calls = [
            ToolCall(
                id=tc.id, function=ToolCallFunction(name=tc.function.name, arguments=tc.function.arguments or "{}")
            )
            for tc in (choice.message.tool_calls or [])
            if tc.type == "function"
        ]
        u = resp.usage
        return ModelResponse(
            content=choice.message.content or "",
            tool_calls=calls,
            usage=usage_of(u.prompt_tokens if u else 0, u.completion_tokens if u else 0),
            stop_reason=_FINISH.get(choice.finish_reason or "", "other"),
            model=resp.model,
        )

    async def _streamed(self, kwargs: dict[str, Any], on_delta: DeltaCallback) -> ModelResponse:
        stream = await self._client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish, model, usage = "", kwargs["model"], usage_of(0, 0)
        async with stream:
            async for event in stream:
                model = event.model or model
                if event.usage is not None:
                    usage = usage_of(event.usage.prompt_tokens, event.usage.completion_tokens)
                for choice in event.choices:
                    delta = choice.delta
                    if delta.content:
                        text.append(delta.content)
                        await on_delta(delta.content)
                    for tc in delta.tool_calls or []:
                        slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] = tc.id or slot["id"]
                        if tc.function is not None:
                            slot["name"] += tc.function.name or ""
                            slot["arguments"] += tc.function.arguments or ""
                    finish = choice.finish_reason or finish
        tool_calls = [
            ToolCall(id=c["id"], function=ToolCallFunction(name=c["name"], arguments=c["arguments"] or "{}"))
            for _, c in sorted(calls.items())
        ]
        return ModelResponse("".join(text), tool_calls, usage, _FINISH.get(finish, "other"), model)
