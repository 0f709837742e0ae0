"""Providers come from $RATH_HOME/config.json and the environment (which wins); secrets never leak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.providers import (
    AnthropicProvider,
    ModelRequest,
    ModelResponse,
    OpenAIProvider,
    ProviderConfigError,
    ProviderRegistry,
    SamplingProvider,
    ScriptedProvider,
    load_provider,
)
from runtime.sessions.model import Chunk, Usage

SECRET = "sk-config-secret-77"


def write_config(home: Path, data: dict[str, object]) -> None:
    (home / "config.json").write_text(json.dumps(data))


@pytest.mark.anyio
async def test_nothing_configured_gives_the_offline_scripted_echo(tmp_path: Path) -> None:
    provider = load_provider(None, tmp_path, env={})
    assert isinstance(provider, ScriptedProvider) and provider.replies is None


@pytest.mark.anyio
async def test_environment_wins_over_config_file(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        {
            "provider": "anthropic",
            "providers": {"openai": {"api_key": "file-key-0000", "base_url": "http://file", "model": "file-model"}},
        },
    )
    env = {"RATH_PROVIDER": "openai", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "OPENAI_DEFAULT_MODEL": "env-model"}
    provider = load_provider(None, tmp_path, env=env)
    assert isinstance(provider, OpenAIProvider)
    assert provider.model == "env-model"
    assert "127.0.0.1:1" in repr(provider) and "file-key" not in repr(provider)
    await provider.aclose()


@pytest.mark.anyio
async def test_config_file_alone_selects_and_configures(tmp_path: Path) -> None:
    write_config(
        tmp_path, {"provider": "anthropic", "providers": {"anthropic": {"api_key": SECRET, "model": "claude-x"}}}
    )
    provider = load_provider(None, tmp_path, env={})
    assert isinstance(provider, AnthropicProvider) and provider.model == "claude-x"
    assert SECRET not in repr(provider)
    await provider.aclose()


def test_missing_key_says_which_variable_to_set(tmp_path: Path) -> None:
    with pytest.raises(ProviderConfigError, match="set OPENAI_API_KEY") as info:
        load_provider("openai", tmp_path, env={})
    assert "RATH_PROVIDER=scripted" in str(info.value)


def test_unknown_names_and_settings_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ProviderConfigError, match="unknown provider 'gemini'"):
        load_provider("gemini", tmp_path, env={})
    write_config(tmp_path, {"providers": {"openai": {"api_key": SECRET, "temprature": 1}}})
    with pytest.raises(ProviderConfigError, match=r"unknown setting\(s\) \['temprature'\]") as info:
        load_provider("openai", tmp_path, env={})
    assert SECRET not in str(info.value)
    with pytest.raises(ProviderConfigError, match="connected MCP client"):
        load_provider("sampling", tmp_path, env={})


def test_invalid_config_json_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{oops")
    with pytest.raises(ProviderConfigError, match=r"config\.json is not valid JSON"):
        load_provider(None, tmp_path, env={})


@pytest.mark.anyio
async def test_scripted_script_path_is_relative_to_home_and_rath_script_wins(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(["from a"]))
    (tmp_path / "b.json").write_text(json.dumps(["from b"]))
    write_config(tmp_path, {"providers": {"scripted": {"script": "a.json"}}})
    ask = ModelRequest(messages=[Chunk(kind="user", content="hi")])
    assert (await load_provider(None, tmp_path, env={}).complete(ask)).content == "from a"
    env = {"RATH_SCRIPT": str(tmp_path / "b.json")}
    assert (await load_provider(None, tmp_path, env=env).complete(ask)).content == "from b"


@pytest.mark.anyio
async def test_sampling_provider_asks_its_callback() -> None:
    seen: list[ModelRequest] = []

    async def client_model(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return ModelResponse(
            "from the client", [], Usage(total_tokens=3, prompt_tokens=2, completion_tokens=1), "stop", "host"
        )

    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    request = ModelRequest(messages=[Chunk(kind="user", content="hi")], system="sys")
    response = await SamplingProvider(client_model).complete(request, on_delta=on_delta)
    assert response.content == "from the client" and deltas == ["from the client"] and seen == [request]


@pytest.mark.anyio
async def test_registry_builds_once_accepts_registrations_and_closes(tmp_path: Path) -> None:
    registry = ProviderRegistry(tmp_path, env={"OPENAI_API_KEY": SECRET})
    assert registry.default_name() == "scripted"
    assert registry.get() is registry.get("scripted")
    openai_provider = registry.get("openai")
    assert isinstance(openai_provider, OpenAIProvider)
    custom = ScriptedProvider(["custom"])
    registry.register("default", custom)
    assert registry.default_name() == "default" and registry.get() is custom
    await registry.aclose()
    assert registry.get("openai") is not openai_provider
    await registry.aclose()


@pytest.mark.anyio
async def test_credentials_in_a_base_url_stay_out_of_the_repr(tmp_path: Path) -> None:
    provider = load_provider("openai", tmp_path, env={"OPENAI_BASE_URL": "http://bob:hunter22@127.0.0.1:1/v1"})
    assert "hunter22" not in repr(provider) and "bob" not in repr(provider) and "127.0.0.1:1" in repr(provider)
    await provider.aclose()  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_every_provider_satisfies_the_protocol(tmp_path: Path) -> None:
    from runtime.providers import Provider

    async def model(request: ModelRequest) -> ModelResponse:
        return ModelResponse("x", [], Usage(), "stop", "m")

    env = {"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": SECRET}
    built = [load_provider(name, tmp_path, env=env) for name in ("openai", "anthropic", "scripted")]
    for provider in [*built, SamplingProvider(model)]:
        assert isinstance(provider, Provider), provider
    assert [p.name for p in built] == ["openai", "anthropic", "scripted"]
    for provider in built[:2]:
        await provider.aclose()  # type: ignore[attr-defined]
