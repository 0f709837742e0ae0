"""FlowToolCall definitions and the built-in sandbox tools, on a real local sandbox."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from runtime.errors import InvalidInputError, LeaseLostError, RunFailure
from runtime.flow.tools import MAX_RESULT_CHARS, FlowToolCall, run_tool_calls, sandbox_tools, tool_map
from runtime.sandbox.local import LocalSandbox
from runtime.sessions.model import ToolCall, ToolCallFunction

OBJ = {"type": "object", "properties": {}}


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=f"call_{name}", function=ToolCallFunction(name=name, arguments=json.dumps(arguments)))


async def nothing() -> str:
    return ""


@pytest.mark.anyio
async def test_sandbox_tools_read_write_list_check_and_run(sandbox: LocalSandbox) -> None:
    tools = tool_map(sandbox_tools(sandbox))
    assert sorted(tools) == ["list_files", "path_exists", "read_file", "run_code", "run_command", "write_file"]
    assert len({t.resource_key for t in tools.values()}) == 1  # one workspace: calls on it keep their order
    outcomes = await run_tool_calls(
        tools,
        [
            call("write_file", path="src/app.py", content="print(6 * 7)\n"),
            call("path_exists", path="src/app.py"),
            call("list_files", path="src"),
            call("read_file", path="src/app.py"),
            call("run_command", command="python3 src/app.py; exit 4"),
            call("run_code", code="import sys; print('stderr says hi', file=sys.stderr)"),
        ],
    )
    assert [o.error for o in outcomes] == [None] * 6
    assert outcomes[0].content == "wrote 13 bytes to src/app.py"
    assert json.loads(outcomes[1].content) == {"path": "src/app.py", "exists": True}
    assert json.loads(outcomes[2].content)["entries"] == [{"name": "app.py", "is_dir": False, "size": 13}]
    assert outcomes[3].content == "print(6 * 7)\n"
    ran = json.loads(outcomes[4].content)
    assert (ran["exit_code"], ran["stdout"], ran["timed_out"]) == (4, "42\n", False)  # a failing command is data
    assert json.loads(outcomes[5].content)["stderr"] == "stderr says hi\n"


@pytest.mark.anyio
async def test_paths_outside_the_workspace_are_refused_as_execution_errors(sandbox: LocalSandbox) -> None:
    tools = tool_map(sandbox_tools(sandbox))
    escape, missing = await run_tool_calls(
        tools, [call("write_file", path="../escaped.txt", content="x"), call("read_file", path="nope.txt")]
    )
    assert (
        escape.error == "execution_error" and "leaves the workspace" in json.loads(escape.content)["error"]["message"]
    )
    assert missing.error == "execution_error"
    assert not (sandbox.root.parent / "escaped.txt").exists()


@pytest.mark.anyio
async def test_arguments_are_checked_against_the_schema(sandbox: LocalSandbox) -> None:
    tools = tool_map(sandbox_tools(sandbox))
    (extra, wrong_type) = await run_tool_calls(
        tools, [call("read_file", path="a", mode="rb"), call("run_command", command="true", timeout_s=-1)]
    )
    assert extra.error == wrong_type.error == "invalid_arguments"
    assert "Additional properties are not allowed ('mode' was unexpected)" in extra.content
    assert "argument timeout_s" in wrong_type.content


@pytest.mark.anyio
async def test_big_results_are_cut_off_with_a_note() -> None:
    async def big() -> str:
        return "x" * (MAX_RESULT_CHARS + 10)

    (outcome,) = await run_tool_calls(tool_map([FlowToolCall("big", "big", OBJ, big)]), [call("big")])
    assert len(outcome.content) < MAX_RESULT_CHARS + 100 and outcome.content.endswith(
        "[... 10 more characters cut off]"
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    "error", [RunFailure("effect 'tool.1' is ambiguous; resolve it first", run_id="run_1"), LeaseLostError("run_1", 3)]
)
async def test_a_journal_failure_leaves_as_itself_for_the_durable_layer(error: Exception) -> None:
    # A tool's own failure is a result; what the journal raises (the ledger's refusals) must keep its
    # type, not come wrapped in the task group's exception group, so the runner can tell what happened.
    async def journal(key: str, fn: Callable[[], Awaitable[Any]], effect_class: str, /) -> Any:
        if key == "tool.1":
            raise error
        return await fn()

    tools = tool_map([FlowToolCall("a", "a", OBJ, nothing), FlowToolCall("b", "b", OBJ, nothing)])
    with pytest.raises(type(error)) as caught:
        await run_tool_calls(tools, [call("a"), call("b")], journal=journal)
    assert caught.value is error


@pytest.mark.parametrize(
    ("name", "schema", "message"),
    [
        ("has space", OBJ, "tool name 'has space' is not valid"),
        ("ok", {"type": "string"}, "parameters must be a JSON schema with type 'object'"),
        ("ok", {"type": "object", "properties": {"a": {"type": "nonsense"}}}, "not a valid JSON schema"),
    ],
)
def test_bad_tool_definitions_are_refused(name: str, schema: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        FlowToolCall(name, "d", schema, nothing)


def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="two tools are named 'same'"):
        tool_map([FlowToolCall("same", "a", OBJ, nothing), FlowToolCall("same", "b", OBJ, nothing)])
