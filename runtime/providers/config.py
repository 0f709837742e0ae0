"""Provider configuration: ``$RATH_HOME/config.json``, then environment variables (which win), then overrides.

``config.json`` (every part optional)::

    {"provider": "openai",
     "providers": {
        "openai":    {"api_key": "...", "base_url": "http://127.0.0.1:8080/v1", "model": "gpt-4o-mini"},
        "anthropic": {"api_key": "...", "model": "claude-3-5-haiku-latest", "max_tokens": 1024},
        "litellm":   {"model": "bedrock/anthropic.claude-3-5-haiku-20241022-v1:0"},
        "scripted":  {"script": "script.json"}}}

Environment: ``RATH_PROVIDER``; ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``OPENAI_DEFAULT_MODEL``;
``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_DEFAULT_MODEL``; ``LITELLM_MODEL``,
``LITELLM_API_KEY``, ``LITELLM_API_BASE`` (LiteLLM also reads each vendor's own variables); ``RATH_SCRIPT``.

With no provider chosen (neither ``RATH_PROVIDER`` nor ``provider`` in config.json) there is no
default model: the ``agent`` and ``team`` workflows use the waiting MCP client's own model when it
offers sampling, and otherwise fail saying how to configure one (``not_configured_message``). A
fake answer is never given silently: ``scripted`` runs only when chosen. ``configuration_problem``
is what a server reports, in one line, when it starts with a provider it could not build. Keys
are passed to the SDK clients and never appear in reprs, errors or logs.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.errors import InvalidInputError
from runtime.extras import MissingExtraError
from runtime.providers.base import Provider, ProviderConfigError
from runtime.providers.retry import RetryPolicy
from runtime.providers.scripted import ScriptedProvider
from runtime.telemetry import Tracing

PROVIDER_NAMES = ("openai", "anthropic", "litellm", "scripted", "sampling")
CONFIG_FILE = "config.json"
_ENV = {
    "openai": {"api_key": "OPENAI_API_KEY", "base_url": "OPENAI_BASE_URL", "model": "OPENAI_DEFAULT_MODEL"},
    "anthropic": {"api_key": "ANTHROPIC_API_KEY", "base_url": "ANTHROPIC_BASE_URL", "model": "ANTHROPIC_DEFAULT_MODEL"},
    "litellm": {"api_key": "LITELLM_API_KEY", "base_url": "LITELLM_API_BASE", "model": "LITELLM_MODEL"},
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


def configured_provider_name(home: Path, env: Mapping[str, str] | None = None) -> str | None:
    """``$RATH_PROVIDER``, else ``provider`` in config.json, else None (nothing chosen)."""
    env = os.environ if env is None else env
    name = env.get("RATH_PROVIDER") or read_config(home).get("provider")
    return str(name) if name else None


def not_configured_message(home: Path) -> str:
    """What to do when a model is needed and none is configured (CONTRACT §7)."""
    return (
        "no model provider is configured and no connected MCP client offers sampling; configure one: "
        "RATH_PROVIDER=openai with OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server), "
        "or RATH_PROVIDER=anthropic with ANTHROPIC_API_KEY, in the server's environment or as "
        f'{{"provider": "openai", "providers": {{"openai": {{"api_key": "..."}}}}}} in {home / CONFIG_FILE}; '
        "or use a client that offers sampling (its own model answers); RATH_PROVIDER=scripted gives scripted "
        "offline replies, not a model"
    )


def provider_settings(name: str, home: Path, env: Mapping[str, str] | None = None, **overrides: Any) -> dict[str, Any]:
    """The merged settings of one provider: config.json < environment < ``overrides``."""
    env = os.environ if env is None else env
    sections = read_config(home).get("providers", {})
    if not isinstance(sections, dict):
        raise ProviderConfigError(f"providers in {home / CONFIG_FILE} must be an object of provider name to settings")
    section = sections.get(name, {})
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


def _number(name: str, settings: dict[str, Any], key: str, kind: type[int] | type[float], default: float) -> Any:
    value = settings.get(key, default)
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ProviderConfigError(
            f"providers.{name}.{key} must be a number, got {value!r}; fix it in $RATH_HOME/{CONFIG_FILE}"
        ) from None


def _client_settings(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of the openai/anthropic/litellm provider classes, checked."""
    retry = RetryPolicy(
        max_retries=_number(name, settings, "max_retries", int, 3),
        base_delay_s=_number(name, settings, "backoff_s", float, 0.5),
    )
    if name == "litellm" and not settings.get("model"):
        raise ProviderConfigError(
            "provider 'litellm' needs a model named as LiteLLM takes it, provider/model "
            f"(e.g. gemini/gemini-2.0-flash): set LITELLM_MODEL, or providers.litellm.model in $RATH_HOME/{CONFIG_FILE}"
        )
    common: dict[str, Any] = {
        # LiteLLM finds each vendor's key in that vendor's own variables (or AWS/Google credentials)
        "api_key": str(settings["api_key"]) if name == "litellm" and settings.get("api_key") else None,
        "base_url": settings.get("base_url") or None,
        "timeout_s": _number(name, settings, "timeout_s", float, 60.0),
        "retry": retry,
        "max_tokens": _number(name, settings, "max_tokens", int, 0) or None,
    }
    if name != "litellm":
        common["api_key"] = _api_key(name, settings)
    if settings.get("model"):
        common["model"] = str(settings["model"])
    return common


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


def load_provider(
    name: str | None,
    home: Path,
    *,
    env: Mapping[str, str] | None = None,
    tracing: Tracing | None = None,
    **overrides: Any,
) -> Provider:
    """Build the named provider (or the configured one) from config.json, environment and overrides.

    ``tracing``: what the HTTP providers' outgoing calls take their ``traceparent`` header from.

    With no name given and none configured this raises ``ProviderConfigError`` saying how to
    configure one: there is no silent default.
    """
    chosen = name or configured_provider_name(home, env)
    if chosen is None:
        raise ProviderConfigError(not_configured_message(home))
    _check_name(chosen, home)
    if chosen == "sampling":
        raise ProviderConfigError(
            "the 'sampling' provider uses the connected MCP client's model and exists only while a client that "
            "offers sampling is connected; choose openai, anthropic, litellm or scripted here"
        )
    settings = provider_settings(chosen, home, env, **overrides)
    if chosen == "scripted":
        return ScriptedProvider(_script_path(home, settings))
    common = _client_settings(chosen, settings)
    if chosen == "openai":  # the SDKs are imported here, on first use: each takes seconds to import
        from runtime.providers.openai_provider import OpenAIProvider

        return OpenAIProvider(**common, tracing=tracing)
    if chosen == "litellm":
        from runtime.providers.litellm_provider import LiteLLMProvider

        return LiteLLMProvider(**common, tracing=tracing)
    from runtime.providers.anthropic_provider import AnthropicProvider

    return AnthropicProvider(**common, tracing=tracing)


def _check_name(name: str, home: Path) -> None:
    if name not in PROVIDER_NAMES:
        raise ProviderConfigError(
            f"unknown provider {name!r} (from RATH_PROVIDER or {home / CONFIG_FILE}); "
            f"choose one of {', '.join(PROVIDER_NAMES)}"
        )


def _script_path(home: Path, settings: dict[str, Any]) -> Path | None:
    script = settings.get("script")
    if not script:
        return None
    path = Path(str(script)).expanduser()
    return path if path.is_absolute() else home / path


def configuration_problem(home: Path, env: Mapping[str, str] | None = None) -> str | None:
    """One line saying what is wrong with the configured provider, or None when it looks usable.

    Checked without building SDK clients or touching the network (a server start stays fast): the
    config file parses, the name is known, its settings are known, a key or base URL is there, a
    script file is readable and valid. Nothing configured is not a problem (see the module doc).
    Never holds a secret: messages name variables and files, not values.
    """
    try:
        name = configured_provider_name(home, env)
        if name is None or name == "sampling":
            return None
        _check_name(name, home)
        settings = provider_settings(name, home, env)
        if name == "scripted":
            ScriptedProvider(_script_path(home, settings))
        else:
            _client_settings(name, settings)
        if name == "litellm" and importlib.util.find_spec("litellm") is None:  # found, not imported: seconds
            raise MissingExtraError("litellm", "litellm")
    except (ProviderConfigError, InvalidInputError, MissingExtraError) as exc:
        return " ".join(f"model provider misconfigured: {exc}".splitlines())
    return None
