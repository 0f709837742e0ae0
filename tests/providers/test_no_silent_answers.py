"""No silent fake answers: with no provider configured, ``delegate`` gets the waiting client's model
(sampling) or fails saying how to configure one; ``scripted`` answers only when chosen; a bad
configuration is one line when the server starts; a connection error names the URL it tried.

Everything goes through the real MCP client against the real server (in memory), or the real CLI.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.server import MCPServer
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent

from rath_mcp.server import build_server
from runtime import Runtime

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
ERAS = ["legacy", "2026-07-28"]
PROVIDER_VARS = ("RATH_PROVIDER", "RATH_SCRIPT", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY")


@pytest.fixture(autouse=True)
def nothing_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in PROVIDER_VARS:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def server(rt: Runtime) -> MCPServer:
    return build_server(rt)


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def client(server: MCPServer, era: str) -> AsyncIterator[Client]:
    async with Client(server, mode=era) as c:
        yield c


async def delegate(client: Client, task: str) -> dict[str, object]:
    result = await client.call_tool("delegate", {"task": task, "wait_s": 30})
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def test_delegate_with_no_provider_and_no_sampling_fails_saying_how_to_configure_one(
    client: Client, rt: Runtime
) -> None:
    result = await delegate(client, "Say hello back.")
    assert result["status"] == "failed" and result["answer"] is None
    error = str(result["error"])
    assert "no model provider is configured and no connected MCP client offers sampling" in error
    assert "RATH_PROVIDER=openai" in error and "OPENAI_API_KEY" in error and str(rt.home / "config.json") in error
    assert "scripted echo" not in json.dumps(result)


async def test_team_with_no_provider_and_no_sampling_fails_the_same_way(client: Client) -> None:
    result = await client.call_tool("delegate", {"task": "Plan a trip.", "workflow": "team", "wait_s": 30})
    assert result.structured_content is not None
    assert result.structured_content["status"] == "failed"
    assert "no model provider is configured" in str(result.structured_content["error"])


class ClientModel:
    """The client's own model: one fixed answer, and a record of what it was asked."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[CreateMessageRequestParams] = []

    async def __call__(self, context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        self.asked.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=self.answer), model="host")


async def test_delegate_with_no_provider_is_answered_by_the_waiting_clients_model(server: MCPServer, era: str) -> None:
    model = ClientModel("Hello back, from the host's model.")
    async with Client(server, mode=era, sampling_callback=model) as client:
        result = await delegate(client, "Say hello back.")
    assert result["status"] == "succeeded", result["error"]
    assert result["answer"] == "Hello back, from the host's model."
    asked = [b.text for m in model.asked[0].messages for b in m.content_as_list if isinstance(b, TextContent)]
    assert "Say hello back." in asked


async def test_the_scripted_provider_answers_only_when_chosen(
    client: Client, rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = await delegate(client, "first")
    assert failed["status"] == "failed"
    monkeypatch.setenv("RATH_PROVIDER", "scripted")
    chosen = await delegate(client, "second")
    assert chosen["status"] == "succeeded" and chosen["answer"] == "(scripted echo) second"


async def test_scripted_chosen_in_config_json_answers_from_its_script(client: Client, rt: Runtime) -> None:
    (rt.home / "script.json").write_text(json.dumps([{"content": "From the script.", "repeat": True}]))
    config = {"provider": "scripted", "providers": {"scripted": {"script": "script.json"}}}
    (rt.home / "config.json").write_text(json.dumps(config))
    result = await delegate(client, "anything")
    assert result["status"] == "succeeded" and result["answer"] == "From the script."


def closed_port() -> int:
    """A local port nothing listens on: bound once to get a free number, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_connection_error_names_the_url_it_tried(client: Client, rt: Runtime) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    config = {"provider": "openai", "providers": {"openai": {"base_url": url, "max_retries": 0}}}
    (rt.home / "config.json").write_text(json.dumps(config))
    result = await delegate(client, "Say hello back.")
    assert result["status"] == "failed"
    assert f"the connection to {url}/chat/completions failed" in str(result["error"])


def serve_briefly(home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``rath-mcp serve`` on stdio with its input closed at once: it starts, reports, and exits."""
    environ = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    environ.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "rath_mcp", "serve", "--home", str(home), "--workers", "0"],
        input="",
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
        check=False,
    )


SECRET = "sk-start-secret-0042"


@pytest.mark.parametrize(
    ("config", "env", "expected"),
    [
        ("{not json", {}, "config.json is not valid JSON"),
        (None, {"RATH_PROVIDER": "gemini"}, "unknown provider 'gemini'"),
        (None, {"RATH_PROVIDER": "anthropic"}, "needs an API key: set ANTHROPIC_API_KEY"),
        (json.dumps({"provider": "openai", "providers": {"openai": {"api_key": SECRET, "modle": "x"}}}), {}, "modle"),
    ],
    ids=["bad-json", "unknown-name", "missing-key", "unknown-setting"],
)
async def test_a_misconfigured_provider_is_reported_in_one_line_when_the_server_starts(
    tmp_path: Path, config: str | None, env: dict[str, str], expected: str
) -> None:
    if config is not None:
        (tmp_path / "config.json").write_text(config)
    out = serve_briefly(tmp_path, **env)
    lines = [line for line in out.stderr.splitlines() if "provider" in line]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("rath-mcp: model provider misconfigured: ") and expected in lines[0]
    assert SECRET not in out.stderr and "Traceback" not in out.stderr
    assert out.stdout == ""  # stdout is the protocol's


async def test_a_server_with_nothing_or_a_good_provider_configured_reports_nothing(tmp_path: Path) -> None:
    assert "provider" not in serve_briefly(tmp_path).stderr
    assert "provider" not in serve_briefly(tmp_path, RATH_PROVIDER="openai", OPENAI_API_KEY=SECRET).stderr
