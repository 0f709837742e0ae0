"""Provider configuration: ``$RATH_HOME/config.json``, then environment variables (which win), then overrides.

``config.json`` (every part optional)::

    {"provider": "openai",
     "providers": {
        "openai":    {"api_key": "...", "base_url": "http://127.0.0.1:8080/v1", "model": "gpt-4o-mini"},
        "anthropic": {"api_key": "...", "model": "claude-3-5-haiku-latest", "max_tokens": 1024},
        "scripted":  {"script": "script.json"}}}

Environment: ``RATH_PROVIDER``; ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``OPENAI_DEFAULT_MODEL``;
``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_DEFAULT_MODEL``; ``RATH_SCRIPT``. With
nothing configured the provider is ``scripted`` (echo when there is no script), so everything runs
offline. Keys are passed to the SDK clients and never appear in reprs, errors or logs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.providers.base import Provider, ProviderConfigError
from runtime.providers.retry import RetryPolicy
from runtime.providers.scripted import ScriptedProvider

PROVIDER_NAMES = ("openai", "anthropic", "scripted", "sampling")
CONFIG_FILE = "config.json"
_ENV = {
    "openai": {"api_key": "OPENAI_API_KEY", "base_url": "OPENAI_BASE_URL", "model": "OPENAI_DEFAULT_MODEL"},
    "anthropic": {"api_key": "ANTHROPIC_API_KEY", "base_url": "ANTHROPIC_BASE_URL", "model": "ANTHROPIC_DEFAULT_MODEL"},
    "scripted": {"script": "RATH_SCRIPT"},
}
_KNOWN = {"api_key", "base_url", "model", "timeout_s", "max_retries", "backoff_s", "max_tokens", "script"}


def read_config(home: Path) -> dict[str, Any]:
    """The parsed ``config.json`` of a home ({} when there is none)."""
    path = home / CONFIG_FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ProviderConfigError(f"{path} is not valid JSON ({exc}); fix or remove it") from None
    if not isinstance(data, dict):
        raise ProviderConfigError(f"{path} must hold a JSON object like {{'provider': 'openai', 'providers': {{}}}}")
    return data


def default_provider_name(home: Path, env: Mapping[str, str] | None = None) -> str:
    """``$RATH_PROVIDER``, else ``provider`` in config.json, else ``scripted``."""
    env = os.environ if env is None else env
    name = env.get("RATH_PROVIDER") or read_config(home).get("provider") or "scripted"
    return str(name)


def provider_settings(name: str, home: Path, env: Mapping[str, str] | None = None, **overrides: Any) -> dict[str, Any]:
    """The merged settings of one provider: config.json < environment < ``overrides``."""
    env = os.environ if env is None else env
    section = read_config(home).get("providers", {}).get(name, {})
    if not isinstance(section, dict):
        raise ProviderConfigError(f"providers.{name} in {home / CONFIG_FILE} must be an object")
    settings = dict(section)
    for key, var in _ENV.get(name, {}).items():
        if env.get(var):
            settings[key] = env[var]
    settings.update({k: v for k, v in overrides.items() if v is not None})
    unknown = set(settings) - _KNOWN
    if unknown:
        raise ProviderConfigError(
            f"unknown setting(s) {sorted(unknown)} for provider {name!r}; known: {sorted(_KNOWN)}"
        )
    return settings


def _retry(settings: dict[str, Any]) -> RetryPolicy:
    return RetryPolicy(
        max_retries=int(settings.get("max_retries", 3)), base_delay_s=float(settings.get("backoff_s", 0.5))
    )


def _api_key(name: str, settings: dict[str, Any]) -> str:
    key = settings.get("api_key")
    if key:
        return str(key)
    if settings.get("base_url"):
        return "unused"  # local OpenAI-compatible servers (llama.cpp, vLLM) accept any key
    var = _ENV[name]["api_key"]
    raise ProviderConfigError(
        f"provider {name!r} needs an API key: set {var}, or providers.{name}.api_key in $RATH_HOME/{CONFIG_FILE}, "
        "or use RATH_PROVIDER=scripted to run offline"
    )


def load_provider(name: str | None, home: Path, *, env: Mapping[str, str] | None = None, **overrides: Any) -> Provider:
    """Build the named provider (or the configured default) from config.json, environment and overrides."""
    chosen = name or default_provider_name(home, env)
    if chosen not in PROVIDER_NAMES:
        raise ProviderConfigError(f"unknown provider {chosen!r}; choose one of {', '.join(PROVIDER_NAMES)}")
    if chosen == "sampling":
        raise ProviderConfigError(
            "the 'sampling' provider uses the connected MCP client's model and exists only while a client that "
            "offers sampling is connected; choose openai, anthropic or scripted here"
        )
    settings = provider_settings(chosen, home, env, **overrides)
    if chosen == "scripted":
        script = settings.get("script")
        if not script:
            return ScriptedProvider(None)
        path = Path(str(script)).expanduser()
        return ScriptedProvider(path if path.is_absolute() else home / path)
    common: dict[str, Any] = {
        "api_key": _api_key(chosen, settings),
        "base_url": settings.get("base_url") or None,
        "timeout_s": float(settings.get("timeout_s", 60.0)),
        "retry": _retry(settings),
        "max_tokens": int(settings["max_tokens"]) if settings.get("max_tokens") else None,
    }
    if settings.get("model"):
        common["model"] = str(settings["model"])
    if chosen == "openai":  # the SDKs are imported here, on first use: each takes seconds to import
        from runtime.providers.openai_provider import OpenAIProvider

        return OpenAIProvider(**common)
    from runtime.providers.anthropic_provider import AnthropicProvider

    return AnthropicProvider(**common)
