"""A secret's value is resolved when used and never written: not in the store, a log line or an MCP reply.

A random marker is planted as a secret (``env:`` source in config.json). A workflow step gets it with
``ctx.secret`` and tries every way out: it returns it (state and result), reports it as progress, records
it as an effect result, writes it into a session chunk, logs it and finally fails with it in the error.
The ``agent`` workflow (scripted provider) runs a command whose environment maps a variable to
``secret://MARKER`` and prints it to stdout and stderr. Then every byte of the SQLite files (database
and WAL), every captured log line and every MCP reply is searched for the marker: zero hits, while
``secret://MARKER`` shows where the value was (the command really saw the value).
"""

from __future__ import annotations

import json
import logging
import secrets
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from rath_mcp.server import build_server
from runtime import EffectClass, InvalidInputError, Runtime, StepContext, Workflow, step
from runtime.flow.tools import sandbox_tools, tool_map
from runtime.sandbox.local import LocalSandbox
from runtime.secrets import Secrets

pytestmark = pytest.mark.anyio
log = logging.getLogger("tests.leaky")


class Leaky(Workflow):
    """Tries to keep the secret it is given everywhere a step can write."""

    name = "leaky"

    @step(entry=True, effects=EffectClass.IDEMPOTENT, successors=["fail"])
    async def keep(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        value = await ctx.secret("MARKER")
        await ctx.progress(f"the token is {value}")
        stored = await ctx.effect("keep", lambda: {"token": value}, EffectClass.IDEMPOTENT)
        session = await ctx.runtime.sessions.create([{"kind": "user", "content": f"token={value}"}])
        ctx.set_output_session(session.id)
        log.warning("the token is %s", value)
        return {"token": value, "stored": stored}

    @step()
    async def fail(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        raise RuntimeError(f"could not use {await ctx.secret('MARKER')}")


def replies_of(result: Any) -> str:
    return json.dumps([c.model_dump(mode="json") for c in result.content]) + json.dumps(result.structured_content)


async def test_a_secret_never_reaches_the_store_the_logs_or_a_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    marker = "mk" + secrets.token_hex(16)
    monkeypatch.setenv("RATH_TEST_MARKER", marker)
    home = tmp_path / "home"
    home.mkdir()
    command = 'echo "token=$TOKEN"; echo "$TOKEN" >&2'
    script = [
        {
            "tool_calls": [
                {"name": "run_command", "arguments": {"command": command, "env": {"TOKEN": "secret://MARKER"}}}
            ]
        },
        {"content": "Done."},
    ]
    (home / "script.json").write_text(json.dumps({"replies": script}))
    config = {
        "provider": "scripted",
        "providers": {"scripted": {"script": "script.json"}},
        "secrets": {"MARKER": "env:RATH_TEST_MARKER"},
    }
    (home / "config.json").write_text(json.dumps(config))
    caplog.set_level(logging.DEBUG)
    replies: list[str] = []

    async def ask(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await client.call_tool(tool, arguments)
        replies.append(replies_of(result))
        assert not result.is_error and result.structured_content is not None, replies[-1]
        content: dict[str, Any] = result.structured_content
        return content

    async with Runtime.open(home) as rt:
        rt.workflows.register(Leaky)
        async with Client(build_server(rt)) as client:
            leaky = await ask(client, "run_start", workflow="leaky", wait_s=30)
            assert leaky["status"] == "failed" and "could not use secret://MARKER" in leaky["error"]
            agent = await ask(client, "run_start", workflow="agent", message="print the token", wait_s=30)
            assert agent["status"] == "succeeded", agent["error"]
            for run in (leaky, agent):
                await ask(client, "run_get", run_id=run["run_id"])
                await ask(client, "run_events", run_id=run["run_id"], limit=500)
            told = await ask(client, "session_get", session_id=agent["output_session_id"])
            await ask(client, "effect_list")
            sessions = (await ask(client, "session_list", limit=50))["sessions"]
            for s in sessions:
                await ask(client, "session_get", session_id=s["session_id"])
                await ask(client, "session_export", session_id=s["session_id"])
        files = sorted(p for p in home.rglob("rath.db*") if p.is_file())
        assert any(p.name.endswith("-wal") for p in files)  # searched while open: the WAL holds recent writes
        stored = b"".join(p.read_bytes() for p in files)
    stored += b"".join(p.read_bytes() for p in sorted(home.rglob("rath.db*")) if p.is_file())

    everything = "\n".join(replies)
    # each reads secret://MARKER: the value the step and the command had was the one resolved
    assert "token=secret://MARKER" in json.dumps(told["chunks"])  # the agent's command, stdout and stderr
    assert "secret://MARKER" in json.dumps(told["chunks"][-2]["content"]).split("stderr")[1]
    assert "the token is secret://MARKER" in caplog.text
    assert marker.encode() not in stored
    assert marker not in caplog.text and all(marker not in r.getMessage() for r in caplog.records)
    assert marker not in everything


def test_an_unknown_or_malformed_secret_is_a_clear_error(tmp_path: Path) -> None:
    known = Secrets({"A": "env:RATH_TEST_UNSET_VARIABLE"}, str(tmp_path / "config.json"))
    with pytest.raises(InvalidInputError, match=r"unknown secret 'B' .*config\.json"):
        known.resolve("secret://B")
    with pytest.raises(InvalidInputError, match="RATH_TEST_UNSET_VARIABLE, which is not set"):
        known.resolve("A")
    with pytest.raises(InvalidInputError, match="write env:VARIABLE or file:/path"):
        Secrets({"A": "vault:x"}, "config.json")
    (tmp_path / "token").write_text("s3cr3t\n")
    from_file = Secrets({"T": f"file:{tmp_path / 'token'}"}, "config.json")
    assert from_file.resolve("T") == "s3cr3t"
    assert from_file.redactor.text("a s3cr3t b") == "a secret://T b"


def test_a_value_is_found_inside_json_text_too() -> None:
    redactor = Secrets({}, "config.json").redactor
    value = 'p"a\\ss'
    redactor.add("PW", value)
    assert redactor.text(json.dumps({"pw": value})) == '{"pw": "secret://PW"}'
    assert redactor.value({"k": [value, 1]}) == {"k": ["secret://PW", 1]}


async def test_run_command_puts_a_secret_in_the_commands_environment_only(
    sandbox: LocalSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATH_TEST_TOKEN", "tok-" + secrets.token_hex(8))
    known = Secrets({"TOKEN": "env:RATH_TEST_TOKEN"}, "/home/config.json")
    run_command = tool_map(sandbox_tools(sandbox, known))["run_command"]
    env_schema = run_command.parameters["properties"]["env"]
    assert env_schema["maxProperties"] == 32 and env_schema["additionalProperties"]["maxLength"] == 4096
    result = await run_command.fn(command='echo "$T $PLAIN"; echo "$T" >&2', env={"T": "secret://TOKEN", "PLAIN": "x"})
    assert result["exit_code"] == 0
    assert result["stdout"] == "secret://TOKEN x\n" and result["stderr"] == "secret://TOKEN\n"
    with pytest.raises(InvalidInputError, match=r"unknown secret 'NOPE' .*/home/config\.json"):
        await run_command.fn(command="true", env={"T": "secret://NOPE"})
