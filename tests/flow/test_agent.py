"""The agent loop, end to end on a real runtime and a real local sandbox, driven by the scripted provider."""

from __future__ import annotations

import json

import anyio
import anyio.lowlevel
import pytest

from runtime import Runtime
from runtime.errors import InterruptRaised
from runtime.flow.agent import UNTRUSTED_HEADER, Agent, MemoryOptions
from runtime.flow.tools import FlowToolCall, sandbox_tools
from runtime.providers import ScriptedProvider
from runtime.sandbox.local import LocalSandbox
from tests.flow.conftest import Recording

OBJ = {"type": "object", "properties": {}}


def usage(p: int, c: int) -> dict[str, int]:
    return {"prompt_tokens": p, "completion_tokens": c}


@pytest.mark.anyio
async def test_agent_writes_a_file_runs_a_command_that_reads_it_and_answers(rt: Runtime, sandbox: LocalSandbox) -> None:
    script = [
        {
            "content": "I will write the notes first.",
            "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "rath says hi\n"}}],
            "usage": usage(30, 10),
        },
        {
            "tool_calls": [{"name": "run_command", "arguments": {"command": "cat notes.txt; wc -c < notes.txt"}}],
            "usage": usage(50, 8),
        },
        {"content": "The file holds 'rath says hi' (13 bytes).", "usage": usage(70, 12)},
    ]
    provider = Recording(ScriptedProvider(script))
    start = await rt.sessions.create([{"kind": "user", "content": "Write notes.txt, then read it back."}])
    agent = Agent("You are a careful engineer.", provider, sandbox_tools(sandbox))

    result = await agent.run(rt, start.id)

    assert (result.answer, result.rounds, result.truncated, result.stop) == (
        "The file holds 'rath says hi' (13 bytes).",
        3,
        False,
        "answered",
    )
    session = await rt.sessions.get(result.session.id)
    kinds = [(c.kind, c.name or "", c.tool_calls[0].function.name if c.tool_calls else "") for c in session.chunks]
    assert kinds == [
        ("user", "", ""),
        ("assistant", "", "write_file"),
        ("tool_result", "write_file", ""),
        ("assistant", "", "run_command"),
        ("tool_result", "run_command", ""),
        ("assistant", "", ""),
    ]
    assert session.chunks[2].content == "wrote 13 bytes to notes.txt"
    assert session.chunks[2].tool_call_id == session.chunks[1].tool_calls[0].id  # type: ignore[index]
    command = json.loads(session.chunks[4].content)
    assert command["exit_code"] == 0 and command["stdout"] == "rath says hi\n13\n"
    assert (await sandbox.read_file("notes.txt")) == b"rath says hi\n"
    assert (session.usage.prompt_tokens, session.usage.completion_tokens, session.usage.total_tokens) == (150, 30, 180)
    assert result.usage == session.usage
    assert session.metadata["agent"] == {"name": "agent", "rounds": 3, "stop": "answered", "truncated": False}
    ancestors = await rt.sessions.ancestors(session.id)
    assert ancestors[0] == start.id and len(ancestors) == 3  # one snapshot per round, op "run"
    # The model saw the tools and, on its second turn, the result of its first call.
    assert [t.name for t in provider.requests[0].tools][:2] == ["read_file", "write_file"]
    assert provider.requests[1].messages[-1].content == "wrote 13 bytes to notes.txt"
    assert provider.requests[0].system == "You are a careful engineer."


def _tools(log: list[str], gate: anyio.Event) -> list[FlowToolCall]:
    async def waits(tag: str) -> str:
        log.append(f"start {tag}")
        with anyio.fail_after(5):
            await gate.wait()  # only another lane can open it: proves lanes run in parallel
        log.append(f"end {tag}")
        return f"waited {tag}"

    async def opens(tag: str) -> str:
        log.append(f"open {tag}")
        gate.set()
        return f"opened {tag}"

    async def serial(tag: str) -> str:
        log.append(f"start {tag}")
        await anyio.lowlevel.checkpoint()  # yield: a parallel sibling on the same key would start here
        log.append(f"end {tag}")
        return f"serial {tag}"

    schema = {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}
    return [
        FlowToolCall("waits", "wait for the gate", schema, waits, resource_key="a"),
        FlowToolCall("opens", "open the gate", schema, opens, resource_key="b"),
        FlowToolCall("serial", "one at a time", schema, serial, resource_key="c"),
    ]


@pytest.mark.anyio
async def test_tool_calls_run_parallel_across_keys_serial_within_one_results_in_call_order(rt: Runtime) -> None:
    log: list[str] = []
    calls = [
        {"name": "waits", "arguments": {"tag": "w"}},
        {"name": "serial", "arguments": {"tag": "s1"}},
        {"name": "serial", "arguments": {"tag": "s2"}},
        {"name": "opens", "arguments": {"tag": "o"}},
    ]
    provider = ScriptedProvider([{"tool_calls": calls}, {"content": "ok"}])
    start = await rt.sessions.create([{"kind": "user", "content": "go"}])
    result = await Agent("sys", provider, _tools(log, anyio.Event())).run(rt, start.id)

    chunks = (await rt.sessions.get(result.session.id)).chunks
    assert [c.content for c in chunks[2:6]] == ["waited w", "serial s1", "serial s2", "opened o"]
    assert [c.tool_call_id for c in chunks[2:6]] == ["call_1", "call_2", "call_3", "call_4"]
    assert log.index("start w") < log.index("open o") < log.index("end w")
    assert log.index("end s1") < log.index("start s2")


@pytest.mark.anyio
async def test_tool_failures_become_typed_results_and_the_loop_goes_on(rt: Runtime) -> None:
    async def boom() -> str:
        raise RuntimeError("disk on fire")

    async def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    tools = [FlowToolCall("boom", "fails", OBJ, boom), FlowToolCall("add", "adds", schema, add)]
    calls = [
        {"name": "nope", "arguments": {}},
        {"name": "add", "arguments": {"a": 1}},
        {"name": "add", "arguments": '{"a": 1, "b": '},
        {"name": "boom", "arguments": {}},
        {"name": "add", "arguments": {"a": 2, "b": 3}},
    ]
    provider = ScriptedProvider([{"tool_calls": calls}, {"content": "recovered"}])
    start = await rt.sessions.create([{"kind": "user", "content": "go"}])
    result = await Agent("sys", provider, tools).run(rt, start.id)

    assert result.answer == "recovered" and not result.truncated
    results = [c.content for c in (await rt.sessions.get(result.session.id)).chunks if c.kind == "tool_result"]
    errors = [json.loads(r)["error"] for r in results[:4]]
    assert [e["type"] for e in errors] == ["unknown_tool", "invalid_arguments", "invalid_arguments", "execution_error"]
    assert "no tool named 'nope'; tools: add, boom" in errors[0]["message"]
    assert "'b' is a required property" in errors[1]["message"]
    assert "not valid JSON" in errors[2]["message"]
    assert errors[3]["message"] == "RuntimeError: disk on fire"
    assert json.loads(results[4]) == {"sum": 5}


@pytest.mark.anyio
async def test_round_limit_marks_the_output_truncated(rt: Runtime) -> None:
    async def again() -> str:
        return "more"

    provider = ScriptedProvider([{"content": "thinking", "tool_calls": [{"name": "again"}], "repeat": True}])
    start = await rt.sessions.create([{"kind": "user", "content": "loop forever"}])
    result = await Agent("sys", provider, [FlowToolCall("again", "again", OBJ, again)], max_rounds=3).run(rt, start.id)

    assert (result.rounds, result.truncated, result.stop) == (3, True, "max_rounds")
    session = await rt.sessions.get(result.session.id)
    assert session.length == 1 + 3 * 2 and session.metadata["agent"]["truncated"] is True


@pytest.mark.anyio
async def test_token_budget_stops_the_loop(rt: Runtime) -> None:
    async def again() -> str:
        return "more"

    reply = {"tool_calls": [{"name": "again"}], "usage": usage(60, 40), "repeat": True}
    start = await rt.sessions.create([{"kind": "user", "content": "spend"}])
    agent = Agent("sys", ScriptedProvider([reply]), [FlowToolCall("again", "x", OBJ, again)], token_budget=150)
    result = await agent.run(rt, start.id)
    assert (result.rounds, result.truncated, result.stop, result.usage.total_tokens) == (2, True, "token_budget", 200)


@pytest.mark.anyio
async def test_memory_is_recalled_as_untrusted_context_and_the_session_committed(rt: Runtime) -> None:
    await rt.memory.remember("The deploy password rotates every Tuesday.", scope="user", path="ops/deploys")
    await rt.memory.remember("Unrelated note about gardening.", scope="user")
    provider = Recording(ScriptedProvider(["Passwords rotate on Tuesdays."]))
    start = await rt.sessions.create([{"kind": "user", "content": "When does the deploy password rotate?"}])
    agent = Agent("sys", provider, memory=MemoryOptions(commit=True))
    result = await agent.run(rt, start.id)

    session = await rt.sessions.get(result.session.id)
    recalled = session.chunks[1]
    assert recalled.kind == "user" and recalled.name == "memory"
    assert recalled.content.startswith(UNTRUSTED_HEADER)
    assert "memory://user/ops/deploys" in recalled.content and "gardening" not in recalled.content
    assert provider.requests[0].messages[-1] == recalled
    archived = await rt.memory.read(f"memory://session/{session.id}/transcript")
    assert "Passwords rotate on Tuesdays." in archived.content


@pytest.mark.anyio
async def test_streaming_deltas_reach_the_callback(rt: Runtime) -> None:
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    start = await rt.sessions.create([{"kind": "user", "content": "hi"}])
    result = await Agent("sys", ScriptedProvider(["hello there friend"]), on_delta=on_delta).run(rt, start.id)
    assert "".join(deltas) == result.answer == "hello there friend" and len(deltas) == 3


@pytest.mark.anyio
async def test_an_interrupt_raised_by_a_tool_leaves_the_loop_unwrapped(rt: Runtime) -> None:
    async def ask_human() -> str:
        raise InterruptRaised("int_0123")

    async def harmless() -> str:
        return "fine"

    tools = [FlowToolCall("ask_human", "asks", OBJ, ask_human), FlowToolCall("harmless", "ok", OBJ, harmless)]
    provider = ScriptedProvider([{"tool_calls": [{"name": "harmless"}, {"name": "ask_human"}]}])
    start = await rt.sessions.create([{"kind": "user", "content": "go"}])
    with pytest.raises(InterruptRaised) as info:
        await Agent("sys", provider, tools).run(rt, start.id)
    assert info.value.interrupt_id == "int_0123"
