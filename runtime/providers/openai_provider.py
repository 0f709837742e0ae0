"""The ``openai`` provider: the official openai SDK against any OpenAI-compatible chat-completions endpoint.

Requests and replies are in the chat-completions format (``runtime.providers.chat_completions``,
shared with the ``litellm`` provider). Without ``on_delta`` the call is a plain request; with it the
call streams (SSE) and text deltas are passed on as they arrive.
"""

from __future__ import annotations

from typing import Any

import httpx2
import openai

from runtime.providers.base import DeltaCallback, ModelRequest, ModelResponse, safe_url
from runtime.providers.chat_completions import read_reply, read_stream, request_kwargs
from runtime.providers.retry import RetryPolicy, complete_with_retries
from runtime.telemetry import Tracing


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
        kwargs = request_kwargs(
            request, model=self.model, max_tokens=self.max_tokens, trace_headers=self._tracing.headers()
        )
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
        return read_reply(await self._client.chat.completions.create(**kwargs), self.name, kwargs["model"])

    async def _streamed(self, kwargs: dict[str, Any], on_delta: DeltaCallback) -> ModelResponse:
        stream = await self._client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
        async with stream:
            return await read_stream(stream, on_delta, kwargs["model"])
