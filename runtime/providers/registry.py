"""``rt.providers``: the providers of one runtime, built lazily from configuration and closed with it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runtime.providers.base import Provider
from runtime.providers.config import default_provider_name, load_provider


class ProviderRegistry:
    """Named providers for a runtime home; ``get()`` builds each once, ``register`` installs one directly.

    The MCP layer registers a ``SamplingProvider`` under ``"sampling"`` while a client that offers
    sampling is connected; tests register a ``ScriptedProvider`` to drive shipped workflows.
    """

    def __init__(self, home: Path, env: Mapping[str, str] | None = None) -> None:
        self.home = home
        self._env = env
        self._cache: dict[str, Provider] = {}

    def default_name(self) -> str:
        """The provider the shipped workflows use when none is named."""
        if "default" in self._cache:
            return "default"
        return default_provider_name(self.home, self._env)

    def register(self, name: str, provider: Provider) -> None:
        """Use ``provider`` for ``name`` (``"default"`` replaces the configured default)."""
        self._cache[name] = provider

    def unregister(self, name: str) -> None:
        self._cache.pop(name, None)

    def get(self, name: str | None = None) -> Provider:
        """The provider called ``name`` (or the default), built on first use."""
        key = name or self.default_name()
        if key not in self._cache:
            self._cache[key] = load_provider(key, self.home, env=self._env)
        return self._cache[key]

    async def aclose(self) -> None:
        """Close the SDK clients of every provider built here."""
        providers, self._cache = list(self._cache.values()), {}
        for provider in providers:
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()
