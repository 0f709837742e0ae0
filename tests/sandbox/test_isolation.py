"""Isolation is required: with no backend, command tools are refused (file tools stay confined);
``--isolation none`` is an explicit opt-out; results stay whole JSON; OpenSandbox gets the policy."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import httpx
import pytest

from rath_mcp.cli import main
from runtime import Runtime
from runtime.flow.tools import MAX_RESULT_CHARS, run_tool_calls, sandbox_tools, tool_map
from runtime.sandbox import IsolationUnavailableError, PathEscapeError, SandboxError
from runtime.sandbox.local import LocalBackend
from runtime.sandbox.opensandbox import OpenSandboxBackend
from runtime.sandbox.policy import SandboxPolicy, ToolLimits, parse_allow_net
from runtime.sessions.model import ToolCall, ToolCallFunction
from tests.sandbox.conftest import EMULATOR_API_KEY, require_bwrap

pytestmark = pytest.mark.anyio


@pytest.fixture
def no_bwrap_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH with the usual tools but no bwrap (as on a machine without bubblewrap)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "true", "echo", "cat", "ls"):
        for where in ("/usr/bin", "/bin"):
            if os.path.exists(f"{where}/{tool}"):
                os.symlink(f"{where}/{tool}", bin_dir / tool)
                break
    monkeypatch.setenv("PATH", str(bin_dir))


def _call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=uuid.uuid4().hex[:8], function=ToolCallFunction(name=name, arguments=json.dumps(arguments)))


async def test_without_a_backend_commands_are_refused_and_file_tools_stay_confined(
    tmp_path: Path, no_bwrap_path: None
) -> None:
    sandbox = await LocalBackend(tmp_path / "ws").open("w")
    assert sandbox.capabilities.isolation == "unavailable"
    for attempt in (sandbox.run_command("echo hi"), sandbox.run_code("print(1)")):
        with pytest.raises(IsolationUnavailableError, match="install bubblewrap") as caught:
            await attempt
        assert "--isolation none" in str(caught.value)
    await sandbox.write_file("notes.txt", "kept")
    assert await sandbox.read_file("notes.txt") == b"kept"
    with pytest.raises(PathEscapeError):
        await sandbox.read_file("../../etc/passwd")

    tools = tool_map(sandbox_tools(sandbox))
    outcomes = await run_tool_calls(
        tools, [_call("run_command", command="cat /etc/shadow"), _call("read_file", path="notes.txt")]
    )
    refused = json.loads(outcomes[0].content)
    assert outcomes[0].error == "execution_error" and "apt-get install bubblewrap" in refused["error"]["message"]
    assert outcomes[1].content == "kept"


async def test_isolation_none_is_an_explicit_opt_out_and_bwrap_demands_bubblewrap(
    tmp_path: Path, no_bwrap_path: None
) -> None:
    plain = await LocalBackend(tmp_path / "ws", policy=SandboxPolicy(isolation="none")).open("w")
    assert plain.capabilities.isolation == "none"
    assert (await plain.run_command("echo hi")).stdout == "hi\n"
    with pytest.raises(SandboxError, match="bubblewrap is not installed"):
        LocalBackend(tmp_path / "ws", policy=SandboxPolicy(isolation="bwrap"))


async def test_the_runtime_and_the_cli_say_which_isolation_is_in_force(
    tmp_path: Path, no_bwrap_path: None, capsys: pytest.CaptureFixture[str]
) -> None:
    async with Runtime.open(tmp_path / "home", workers=0) as rt:
        assert rt.sandboxes.isolation == "unavailable"
    async with Runtime.open(tmp_path / "home", workers=0, sandbox_policy=SandboxPolicy(isolation="none")) as rt:
        assert rt.sandboxes.isolation == "none"
    code = await _cli(["serve", "--isolation", "bwrap", "--home", str(tmp_path / "home")])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "bubblewrap is not installed" in err, err
    (tmp_path / "home" / "config.json").write_text(json.dumps({"sandbox": {"memory": "plenty"}}))
    code = await _cli(["worker", "--home", str(tmp_path / "home")])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "memory 'plenty' is not a size" in err, err


async def _cli(argv: list[str]) -> int:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(main, argv)


async def test_a_long_output_is_cut_inside_its_field_and_the_result_stays_valid_json(tmp_path: Path) -> None:
    require_bwrap()
    sandbox = await LocalBackend(tmp_path / "ws", max_output_bytes=400_000).open("w")
    tools = tool_map(sandbox_tools(sandbox))
    command = "head -c 300000 /dev/zero | tr '\\0' 'x'; head -c 100000 /dev/zero | tr '\\0' '\"' >&2; exit 3"
    [outcome] = await run_tool_calls(tools, [_call("run_command", command=command)])
    assert len(outcome.content) <= MAX_RESULT_CHARS
    result = json.loads(outcome.content)
    assert result["exit_code"] == 3 and result["truncated"] is True and result["timed_out"] is False
    assert result["limit"] is None and isinstance(result["duration_s"], float)
    assert result["stdout"].startswith("xxxx") and "more characters cut off" in result["stdout"]
    [short] = await run_tool_calls(tools, [_call("run_command", command="echo hi")])
    assert json.loads(short.content)["stdout"] == "hi\n" and json.loads(short.content)["truncated"] is False


async def test_opensandbox_gets_the_policy_its_api_can_express(opensandbox_domain: str) -> None:
    policy = SandboxPolicy(
        limits=ToolLimits(memory_bytes=512 * 1024**2, file_size_bytes=1024**2, cpu_s=5, procs=64),
        allow_net=parse_allow_net("pypi.org,files.pythonhosted.org:443"),
    )
    backend = OpenSandboxBackend(
        opensandbox_domain, EMULATOR_API_KEY, namespace="t" + uuid.uuid4().hex[:12], policy=policy, ready_timeout_s=10
    )
    sandbox = await backend.open("w")
    try:
        async with httpx.AsyncClient() as http:
            url = f"http://{opensandbox_domain}/v1/_emulator/sandboxes/{sandbox.sdk.id}/requested"
            requested = (await http.get(url, headers={"OPEN-SANDBOX-API-KEY": EMULATOR_API_KEY})).json()
        assert requested["resourceLimits"]["memory"] == "512Mi"
        assert requested["networkPolicy"] == {
            "defaultAction": "deny",
            "egress": [
                {"action": "allow", "target": "pypi.org"},
                {"action": "allow", "target": "files.pythonhosted.org"},
            ],
        }
        assert sandbox.capabilities.limits == policy.limits.describe()
        big = await sandbox.run_command("head -c 3000000 /dev/zero > big.bin")
        assert big.limit == "file_size" and "--tool-file-size" in big.stderr, big
        limits = await sandbox.run_command("ulimit -t; ulimit -f; ulimit -v")
        assert limits.stdout.split() == ["5", str(1024**2 // 512), str(512 * 1024)], limits
    finally:
        await sandbox.close()
        await backend.destroy("w")
        await backend.aclose()


async def test_the_demo_says_which_isolation_is_in_force() -> None:
    from rath_mcp.demo import run_demo

    lines: list[str] = []
    assert await run_demo(lines.append) == 0
    expected = "bubblewrap" if shutil.which("bwrap") else "unavailable"
    assert f"(tool commands run with isolation: {expected})" in lines
