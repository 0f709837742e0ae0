"""Providers come from $RATH_HOME/config.json and the environment (which wins); secrets never leak."""

from __future__ import annotations

import json
import re
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
    configuration_problem,
    load_provider,
)
from runtime.sessions.model import Chunk, Usage

SECRET = "sk-config-secret-77"


def write_config(home: Path, data: dict[str, object]) -> None:
    (home / "config.json").write_text(json.dumps(data))


def test_nothing_configured_is_an_error_saying_how_to_configure_a_provider(tmp_path: Path) -> None:
    with pytest.raises(ProviderConfigError, match="no model provider is configured") as info:
        load_provider(None, tmp_path, env={})
    message = str(info.value)
    assert "RATH_PROVIDER=openai" in message and "OPENAI_API_KEY" in message and "ANTHROPIC_API_KEY" in message
    assert str(tmp_path / "config.json") in message and "sampling" in message
    assert configuration_problem(tmp_path, env={}) is None  # not a misconfiguration: nothing to report at start


@pytest.mark.anyio
async def test_scripted_runs_when_chosen_by_environment_or_config_file(tmp_path: Path) -> None:
    ask = ModelRequest(messages=[Chunk(kind="user", content="ping")])
    chosen = load_provider(None, tmp_path, env={"RATH_PROVIDER": "scripted"})
    assert (await chosen.complete(ask)).content == "(scripted echo) ping"
    write_config(tmp_path, {"provider": "scripted"})
    assert isinstance(load_provider(None, tmp_path, env={}), ScriptedProvider)


@pytest.mark.parametrize(
    ("config", "env", "expected"),
    [
        ("{oops", {}, r"config\.json is not valid JSON"),
        ('["openai"]', {}, "must hold a JSON object"),
        ('{"providers": []}', {"RATH_PROVIDER": "openai"}, "providers in .* must be an object"),
        (None, {"RATH_PROVIDER": "gemini"}, "unknown provider 'gemini'"),
        (None, {"RATH_PROVIDER": "openai"}, "needs an API key: set OPENAI_API_KEY"),
        ('{"provider": "anthropic"}', {}, "needs an API key: set ANTHROPIC_API_KEY"),
        (None, {"RATH_PROVIDER": "scripted", "RATH_SCRIPT": "/nonexistent/script.json"}, "cannot read"),
        (
            f'{{"provider": "openai", "providers": {{"openai": {{"api_key": "{SECRET}", "timeout_s": "soon"}}}}}}',
            {},
            r"providers\.openai\.timeout_s must be a number",
        ),
        (
            f'{{"provider": "openai", "providers": {{"openai": {{"api_key": "{SECRET}", "modle": "x"}}}}}}',
            {},
            r"unknown setting\(s\) \['modle'\]",
        ),
    ],
)
def test_a_misconfigured_provider_is_one_line_without_secrets(
    tmp_path: Path, config: str | None, env: dict[str, str], expected: str
) -> None:
    if config is not None:
        (tmp_path / "config.json").write_text(config)
    problem = configuration_problem(tmp_path, env=env)
    assert problem is not None and problem.startswith("model provider misconfigured: ")
    assert re.search(expected, problem), problem
    assert "\n" not in problem and SECRET not in problem


def test_a_usable_configuration_has_no_problem(tmp_path: Path) -> None:
    assert configuration_problem(tmp_path, env={"RATH_PROVIDER": "openai", "OPENAI_API_KEY": SECRET}) is None
    assert configuration_problem(tmp_path, env={"RATH_PROVIDER": "openai", "OPENAI_BASE_URL": "http://x/v1"}) is None
    assert configuration_problem(tmp_path, env={"RATH_PROVIDER": "sampling"}) is None
    assert configuration_problem(tmp_path, env={"RATH_PROVIDER": "scripted"}) is None


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
    write_config(tmp_path, {"provider": "scripted", "providers": {"scripted": {"script": "a.json"}}})
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
    assert registry.default_name() is None
    with pytest.raises(ProviderConfigError, match="no model provider is configured"):
        registry.get()
    assert registry.get("scripted") is registry.get("scripted")
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
