"""The ``litellm`` provider: one client for the model vendors LiteLLM speaks, named ``provider/model``.

What it adds over the ``openai`` provider (any OpenAI-compatible endpoint): vendors whose APIs are
not OpenAI-compatible (Bedrock, Vertex AI, Gemini, Azure, Cohere, Ollama's native API…), each with
its own authentication (AWS credentials, Google application default credentials, the vendor's own
environment variables), chosen by the model name alone (``bedrock/anthropic.claude-3-5-sonnet``,
``gemini/gemini-2.0-flash``, ``ollama/llama3.2``), with tool calls translated to and from each
vendor's format by LiteLLM. Requests and answers are in the OpenAI chat format on our side, written
and read by ``runtime.providers.chat_completions`` as for the ``openai`` provider.

The ``litellm`` package comes with the ``litellm`` extra (``pip install 'rath-mcp[litellm]'``) and is
imported on first use; LiteLLM's own retries are off (``num_retries=0``): ``runtime.providers.retry``
retries for it, as for the other providers.
"""

from __future__ import annotations

import os
from typing import Any

import openai

from runtime.extras import require_extra
from runtime.providers.base import DeltaCallback, ModelRequest, ModelResponse, safe_url
from runtime.providers.chat_completions import read_reply, read_stream, request_kwargs
from runtime.providers.retry import RetryPolicy, complete_with_retries
from runtime.telemetry import Tracing


class LiteLLMProvider:
    """Chat completions through ``litellm.acompletion``; a key given here goes to each call, never a log."""

    name = "litellm"

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        max_tokens: int | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        """``tracing``: each call sends the current span's W3C ``traceparent`` (none when off)."""
        # LiteLLM fetches its model price list from GitHub when imported (three tries, seconds offline) unless
        # told to use the copy inside the package: a server start must not wait on, or call, the internet
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        self._litellm = require_extra("litellm", "litellm")
        # LiteLLM prints help banners on stdout when a call fails: a stdio server's stdout is its protocol
        setattr(self._litellm, "suppress_debug_info", True)  # noqa: B010 (a module: mypy knows no such attribute)
        self._tracing = tracing or Tracing()
        self.model = model
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.max_tokens = max_tokens
        self._secret = api_key

    def __repr__(self) -> str:
        where = f", base_url={safe_url(self.base_url)!r}" if self.base_url else ""
        return f"LiteLLMProvider(model={self.model!r}{where})"

    async def aclose(self) -> None:
        return None  # LiteLLM keeps its HTTP clients per process, shared by every caller

    async def complete(self, request: ModelRequest, *, on_delta: DeltaCallback | None = None) -> ModelResponse:
        kwargs = request_kwargs(
            request, model=self.model, max_tokens=self.max_tokens, trace_headers=self._tracing.headers()
        )
        kwargs.update(timeout=self.timeout_s, num_retries=0)
        if self._secret:
            kwargs["api_key"] = self._secret
        if self.base_url:
            kwargs["api_base"] = self.base_url
        return await complete_with_retries(
            self.name,
            lambda: self._plain(kwargs),
            lambda relay: self._streamed(kwargs, relay),
            on_delta,
            policy=self.retry,
            secret=self._secret,
            errors=(openai.APIError,),  # LiteLLM's errors subclass the openai SDK's, whichever vendor answered
            connection_errors=(openai.APIConnectionError,),
            url=safe_url(self.base_url) if self.base_url else f"the {kwargs['model'].split('/')[0]} API",
        )

    async def _plain(self, kwargs: dict[str, Any]) -> ModelResponse:
        return read_reply(await self._litellm.acompletion(**kwargs), self.name, kwargs["model"])

    async def _streamed(self, kwargs: dict[str, Any], on_delta: DeltaCallback) -> ModelResponse:
        stream = await self._litellm.acompletion(**kwargs, stream=True, stream_options={"include_usage": True})
        return await read_stream(stream, on_delta, kwargs["model"])
