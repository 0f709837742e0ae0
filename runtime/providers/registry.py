"""``rt.providers``: the providers of one runtime, built lazily from configuration and closed with it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runtime.providers.base import DeltaCallback, ModelRequest, ModelResponse, Provider, ProviderConfigError
from runtime.providers.config import configured_provider_name, load_provider, not_configured_message
from runtime.providers.sampling import NoSamplingClient
from runtime.providers.traced import traced
from runtime.telemetry import Tracing

SAMPLING = "sampling"


class ClientModelOrAdvice:
    """The default when no provider is configured: the MCP client's model (``sampling``), if one offers it.

    When no connected client offers sampling the call fails with ``ProviderConfigError`` saying how
    to configure a provider, instead of the sampling provider's own message (which assumes sampling
    was chosen on purpose).
    """

    name = SAMPLING

    def __init__(self, sampling: Provider, home: Path) -> None:
        self._sampling = sampling
        self._home = home

    def __repr__(self) -> str:
        return "ClientModelOrAdvice()"

    async def complete(self, request: ModelRequest, *, on_delta: DeltaCallback | None = None) -> ModelResponse:
        try:
            return await self._sampling.complete(request, on_delta=on_delta)
        except NoSamplingClient:
            raise ProviderConfigError(not_configured_message(self._home)) from None


class ProviderRegistry:
    """Named providers for a runtime home; ``get()`` builds each once, ``register`` installs one directly.

    The MCP layer registers a ``SamplingProvider`` under ``"sampling"``, which is also what the
    shipped workflows use when no provider is configured; tests register a ``ScriptedProvider`` (as
    ``"default"``) to drive them. Without either, ``get()`` of the default raises
    ``ProviderConfigError`` saying how to configure one: nothing answers in a model's place unasked.
    """

    def __init__(self, home: Path, env: Mapping[str, str] | None = None, *, tracing: Tracing | None = None) -> None:
        """``tracing``: every provider handed out makes GenAI client spans there (default: none)."""
        self.home = home
        self._env = env
        self.tracing = tracing or Tracing()
        self._cache: dict[str, Provider] = {}

    def default_name(self) -> str | None:
        """The provider the shipped workflows use when none is named (None: nothing is configured)."""
        if "default" in self._cache:
            return "default"
        return configured_provider_name(self.home, self._env)

    def register(self, name: str, provider: Provider) -> None:
        """Use ``provider`` for ``name`` (``"default"`` replaces the configured default)."""
        self._cache[name] = provider

    def get(self, name: str | None = None) -> Provider:
        """The provider called ``name`` (or the default), built on first use; traced when tracing is on."""
        return traced(self._get(name), self.tracing)

    def _get(self, name: str | None) -> Provider:
        key = name or self.default_name()
        if key is None:
            sampling = self._cache.get(SAMPLING)
            if sampling is None:
                raise ProviderConfigError(not_configured_message(self.home))
            return ClientModelOrAdvice(sampling, self.home)
        if key not in self._cache:
            self._cache[key] = load_provider(key, self.home, env=self._env, tracing=self.tracing)
        return self._cache[key]

    async def aclose(self) -> None:
        """Close the SDK clients of every provider built here."""
        providers, self._cache = list(self._cache.values()), {}
        for provider in providers:
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()
