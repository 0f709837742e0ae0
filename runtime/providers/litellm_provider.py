"""The ``litellm`` provider: one client for the model vendors LiteLLM speaks, named ``provider/model``.

What it adds over the ``openai`` provider (any OpenAI-compatible endpoint): vendors whose APIs are
not OpenAI-compatible (Bedrock, Vertex AI, Gemini, Azure, Cohere, Ollama's native API…), each with
its own authentication (AWS credentials, Google application default credentials, the vendor's own
environment variables), chosen by the model name alone (``bedrock/anthropic.claude-3-5-sonnet``,
``gemini/gemini-2.0-flash``, ``ollama/llama3.2``), with tool calls translated to and from each
vendor's format by LiteLLM. Requests and answers are in the OpenAI chat format on our side, so
chunks map as in ``openai_provider`` and the replies are read the same way: text, tool calls (stitched
by index when streamed), usage (the final ``include_usage`` chunk when streamed), finish reason.

The ``litellm`` package comes with the ``litellm`` extra (``pip install 'rath-mcp[litellm]'``) and is
imported on first use; LiteLLM's own retries are off (``num_retries=0``): ``runtime.providers.retry``
retries for it, as for the other providers.
"""

from __future__ import annotations

import os
from typing import Any

import openai

from runtime.extras import require_extra
from runtime.providers.base import DeltaCallback, ModelRequest, ModelResponse, ProviderError, safe_url, usage_of
from runtime.providers.openai_provider import to_openai_messages, to_openai_tools
from runtime.providers.retry import RetryPolicy, complete_with_retries
from runtime.sessions.model import ToolCall, ToolCallFunction
from runtime.telemetry import Tracing

_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls", "length": "length"}


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
        kwargs: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": to_openai_messages(request),
            "timeout": self.timeout_s,
            "num_retries": 0,
        }
        if self._secret:
            kwargs["api_key"] = self._secret
        if self.base_url:
            kwargs["api_base"] = self.base_url
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
            errors=(openai.APIError,),  # LiteLLM's errors subclass the openai SDK's, whichever vendor answered
            connection_errors=(openai.APIConnectionError,),
            url=safe_url(self.base_url) if self.base_url else f"the {kwargs['model'].split('/')[0]} API",
        )

    async def _plain(self, kwargs: dict[str, Any]) -> ModelResponse:
        resp = await self._litellm.acompletion(**kwargs)
        if not resp.choices:
            raise ProviderError("litellm: the response has no choices", provider=self.name)
        choice = resp.choices[0]
        calls = [
            ToolCall(
                id=tc.id, function=ToolCallFunction(name=tc.function.name, arguments=tc.function.arguments or "{}")
            )
            for tc in (choice.message.tool_calls or [])
        ]
        u = getattr(resp, "usage", None)
        return ModelResponse(
            content=choice.message.content or "",
            tool_calls=calls,
            usage=usage_of(u.prompt_tokens if u else 0, u.completion_tokens if u else 0),
            stop_reason=_FINISH.get(choice.finish_reason or "", "other"),
            model=resp.model or kwargs["model"],
        )

    async def _streamed(self, kwargs: dict[str, Any], on_delta: DeltaCallback) -> ModelResponse:
        stream = await self._litellm.acompletion(**kwargs, stream=True, stream_options={"include_usage": True})
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish, model, usage = "", kwargs["model"], usage_of(0, 0)
        async for event in stream:
            model = event.model or model
            u = getattr(event, "usage", None)
            if u is not None and (u.prompt_tokens or u.completion_tokens):
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
        return ModelResponse("".join(text), tool_calls, usage, _FINISH.get(finish, "other"), model)
