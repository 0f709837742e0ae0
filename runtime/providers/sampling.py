"""The ``sampling`` provider: a hook the MCP layer fills with the connected client's own model.

The runtime knows nothing of MCP, so this provider only holds a callback. The MCP adapter builds it
with a function that turns the ``ModelRequest`` into the client's ``sampling/createMessage`` call
and the result back into a ``ModelResponse``. Clients offer no streaming for sampling, so
``on_delta`` receives the whole text once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from runtime.providers.base import DeltaCallback, ModelRequest, ModelResponse, ProviderError

SamplingCallback = Callable[[ModelRequest], Awaitable[ModelResponse]]


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
