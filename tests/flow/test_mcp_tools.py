"""Stdio MCP servers as agent tools: one long-lived process per server, isError stays an error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from runtime import Runtime
from runtime.errors import InvalidInputError
from runtime.flow.agent import Agent
from runtime.flow.mcp_tools import MCPServerError, MCPServerSpec, MCPToolServer, mcp_server_specs
from runtime.flow.tools import ToolExecutionError
from runtime.providers import ScriptedProvider

SERVER = str(Path(__file__).resolve().parents[1] / "fakes" / "mcp_stdio_server.py")


def spec(**overrides: object) -> MCPServerSpec:
    return MCPServerSpec(name="fake", command=sys.executable, args=(SERVER,), **overrides)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_tools_are_listed_with_their_schemas_and_all_calls_share_one_process() -> None:
    async with MCPToolServer(spec(tool_prefix="fake_")) as server:
        tools = {t.name: t for t in await server.tools()}
        assert sorted(tools) == ["fake_add", "fake_crash", "fake_fail", "fake_getenv", "fake_remember", "fake_whoami"]
        assert tools["fake_add"].parameters["required"] == ["a", "b"]
        assert tools["fake_add"].description == "Add two integers."
        assert await tools["fake_add"].fn(a=2, b=40) == "42"
        pids = {await tools["fake_whoami"].fn() for _ in range(3)}
        assert len(pids) == 1
        await tools["fake_remember"].fn(note="first")
        notes = json.loads(await tools["fake_remember"].fn(note="second"))
        assert notes == {"notes": ["first", "second"]}  # state lives in the one server process
        assert server.calls == 6


@pytest.mark.anyio
async def test_an_is_error_result_raises_and_never_reads_as_success() -> None:
    async with MCPToolServer(spec()) as server:
        with pytest.raises(ToolExecutionError, match="refused: not today"):
            await server.call("fail", {"reason": "not today"})
        with pytest.raises(ToolExecutionError, match="Unknown tool: missing"):
            await server.call("missing", {})


@pytest.mark.anyio
async def test_an_error_in_the_block_propagates_unwrapped() -> None:
    with pytest.raises(LookupError, match="from the caller"):
        async with MCPToolServer(spec()):
            raise LookupError("from the caller")


@pytest.mark.anyio
async def test_agent_uses_mcp_tools_and_sees_errors_as_typed_results(rt: Runtime) -> None:
    script = [
        {
            "tool_calls": [
                {"name": "add", "arguments": {"a": 5, "b": 6}},
                {"name": "fail", "arguments": {"reason": "x"}},
            ]
        },
        {"content": "5 + 6 = 11; the other tool refused."},
    ]
    start = await rt.sessions.create([{"kind": "user", "content": "add 5 and 6"}])
    async with MCPToolServer(spec()) as server:
        result = await Agent("sys", ScriptedProvider(script), await server.tools()).run(rt, start.id)
    chunks = (await rt.sessions.get(result.session.id)).chunks
    assert chunks[2].content == "11"
    error = json.loads(chunks[3].content)["error"]
    assert error["type"] == "execution_error" and "refused: x" in error["message"]
    assert result.answer == "5 + 6 = 11; the other tool refused."


@pytest.mark.anyio
async def test_a_server_that_cannot_start_is_a_clear_error(tmp_path: Path) -> None:
    missing = MCPServerSpec(name="ghost", command=str(tmp_path / "no-such-binary"))
    with pytest.raises(InvalidInputError, match="MCP server 'ghost' could not be started"):
        async with MCPToolServer(missing):
            pass
    quits = MCPServerSpec(name="quits", command="sh", args=("-c", "exit 3"))
    with pytest.raises(InvalidInputError, match="'quits' did not complete the MCP handshake"):
        async with MCPToolServer(quits):
            pass
    # It answers initialize but has stopped reading, so the initialized notification cannot be sent.
    deaf = "import json, os, sys; i = json.loads(sys.stdin.readline())['id']; os.close(0); " + (
        "print(json.dumps({'jsonrpc': '2.0', 'id': i, 'result': {}}), flush=True)"
    )
    half = MCPServerSpec(name="half", command=sys.executable, args=("-c", deaf))
    with pytest.raises(InvalidInputError, match="'half' did not complete the MCP handshake"):
        async with MCPToolServer(half):
            pass


@pytest.mark.anyio
async def test_a_crashed_server_gives_clear_errors_not_hangs() -> None:
    async with MCPToolServer(spec()) as server:
        with anyio.fail_after(10), pytest.raises(MCPServerError, match="no answer: the server process exited"):
            await server.call("crash", {})
        with pytest.raises(MCPServerError, match="is not connected"):
            await server.call("add", {"a": 1, "b": 2})


# A hand-written server that misbehaves before answering a tools/call: {misbehave} is run first.
RAW_SERVER = """
import json, os, sys
def send(message):
    print(json.dumps(message), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if request.get("method") == "initialize":
        send({{"jsonrpc": "2.0", "id": request["id"], "result": {{"serverInfo": {{"name": "raw"}}}}}})
    elif request.get("method") == "tools/call":
        {misbehave}
        send({{"jsonrpc": "2.0", "id": request["id"], "result": {{"content": [{{"type": "text", "text": "ok"}}]}}}})
        break
"""


@pytest.mark.anyio
@pytest.mark.parametrize(
    "misbehave",
    [
        'send({"jsonrpc": "2.0", "id": [request["id"]], "result": {}})',  # an answer with an id nobody sent
        'os.close(0); send({"jsonrpc": "2.0", "id": "p1", "method": "ping"})',  # a request it cannot read the reply to
        'print("[" * 100000 + "]" * 100000, flush=True)',  # JSON nested too deep to parse
    ],
)
async def test_a_misbehaving_server_does_not_cancel_the_caller(misbehave: str) -> None:
    raw = MCPServerSpec(name="raw", command=sys.executable, args=("-c", RAW_SERVER.format(misbehave=misbehave)))
    async with MCPToolServer(raw) as server:
        with anyio.fail_after(10):
            assert await server.call("x", {}) == "ok"
            await anyio.sleep(0.1)  # the caller is not cancelled by the connection's reader afterwards


@pytest.mark.anyio
async def test_our_secrets_are_not_passed_to_tool_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    async with MCPToolServer(spec(env={"GREETING": "hej"})) as server:
        assert await server.call("getenv", {"name": "OPENAI_API_KEY"}) == ""
        assert await server.call("getenv", {"name": "GREETING"}) == "hej"
        assert await server.call("getenv", {"name": "PATH"}) != ""
        assert server.server_info["name"] == "fake-tools"


def test_servers_are_declared_in_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({"mcp_servers": {"calc": {"command": "python", "args": ["calc.py"], "tool_prefix": "calc_"}}})
    )
    (calc,) = mcp_server_specs(tmp_path)
    assert (calc.name, calc.command, calc.args, calc.tool_prefix) == ("calc", "python", ("calc.py",), "calc_")
    (tmp_path / "config.json").write_text(json.dumps({"mcp_servers": {"bad": {"args": []}}}))
    with pytest.raises(InvalidInputError, match=r"mcp_servers\.bad needs a 'command'"):
        mcp_server_specs(tmp_path)
