"""Model calls as GenAI client spans, for every provider (OpenTelemetry's GenAI semantic conventions).

``ProviderRegistry`` hands out each provider inside a ``TracedProvider`` when tracing is on, so the
OpenAI-compatible, Anthropic, sampling (the MCP client's model) and scripted providers are traced
alike: a span ``chat MODEL`` with ``gen_ai.operation.name``, ``gen_ai.provider.name`` (and the older
``gen_ai.system``), ``gen_ai.request.model``, the response's model, finish reasons and token usage.
The span is current while the provider runs, so the HTTP providers send its W3C ``traceparent``
(``Tracing.headers``). Messages become attributes only when contents may be captured.
"""

from __future__ import annotations

import json
from typing import Any

from runtime.providers.base import DeltaCallback, ModelRequest, ModelResponse, Provider, ProviderError
from runtime.telemetry import Span, Tracing

#: ``gen_ai.provider.name`` of each provider (the conventions' names where they have one).
GEN_AI_PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "litellm": "litellm",
    "sampling": "mcp.sampling",
    "scripted": "rath.scripted",
}


class TracedProvider:
    """``inner`` with each ``complete`` in a GenAI client span; everything else is ``inner``'s."""

    def __init__(self, inner: Provider, tracing: Tracing) -> None:
        self.name = inner.name
        self._inner = inner
        self._tracing = tracing

    def __getattr__(self, name: str) -> Any:  # model, aclose, … of the provider inside
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"TracedProvider({self._inner!r})"

    async def complete(self, request: ModelRequest, *, on_delta: DeltaCallback | None = None) -> ModelResponse:
        model = request.model or getattr(self._inner, "model", None) or self.name
        system = GEN_AI_PROVIDERS.get(self.name, self.name)
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": system,
            "gen_ai.system": system,
            "gen_ai.request.model": str(model),
            "gen_ai.request.max_tokens": request.max_tokens,
            "gen_ai.request.temperature": request.temperature,
        }
        with self._tracing.span(f"chat {model}", kind="client", attributes=attributes) as span:
            if self._tracing.capture_content:
                _record_input(span, request)
            try:
                response = await self._inner.complete(request, on_delta=on_delta)
            except ProviderError as exc:
                span.set("http.response.status_code", exc.status)
                raise
            span.set_many(
                {
                    "gen_ai.response.model": response.model,
                    "gen_ai.response.finish_reasons": [response.stop_reason],
                    "gen_ai.usage.input_tokens": response.usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": response.usage.completion_tokens,
                }
            )
            if self._tracing.capture_content:
                output = [{"role": "assistant", "content": response.content, "finish_reason": response.stop_reason}]
                span.set("gen_ai.output.messages", json.dumps(output, ensure_ascii=False))
            return response


def _record_input(span: Span, request: ModelRequest) -> None:
    messages = [{"role": chunk.kind, "content": chunk.content} for chunk in request.messages]
    span.set("gen_ai.input.messages", json.dumps(messages, ensure_ascii=False))
    if request.system:
        span.set("gen_ai.system_instructions", request.system)


def traced(provider: Provider, tracing: Tracing) -> Provider:
    """``provider`` in a GenAI span when tracing is on; itself (no cost) when it is off."""
    return TracedProvider(provider, tracing) if tracing.enabled else provider
