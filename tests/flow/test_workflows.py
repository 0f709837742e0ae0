"""The shipped ``agent`` and ``team`` workflows, run durably end to end on the scripted provider."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from runtime import Runtime
from runtime.providers import ScriptedProvider
from tests.flow.test_mcp_tools import SERVER

pytestmark = pytest.mark.anyio


def choose(name: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "choose", "arguments": {"name": name, "reason": f"{name} fits"}}]}


async def test_agent_workflow_uses_the_sessions_sandbox_and_answers(rt: Runtime) -> None:
    script = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "todo.md", "content": "- ship it\n"}}]},
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "cat todo.md"}}]},
        {"content": "todo.md lists: ship it."},
    ]
    rt.providers.register("default", ScriptedProvider(script))
    run = await rt.runs.start("agent", input={"message": "Make a todo list and show it."})
    run = await rt.runs.wait(run.id, 20)

    assert run.status == "succeeded", run.error
    assert run.state["answer"] == "todo.md lists: ship it." and run.state["rounds"] == 3
    assert run.state["truncated"] is False
    out = await rt.sessions.get(run.output_session_id or "")
    assert out.chunks[0].content == "Make a todo list and show it."
    assert json.loads(out.chunks[4].content)["stdout"] == "- ship it\n"
    assert out.usage.total_tokens > 0 and out.metadata["agent"]["stop"] == "answered"
    sandbox = await rt.sandboxes.get(out.placement)
    assert await sandbox.read_file("todo.md") == b"- ship it\n"
    events = [e.type for e in await rt.runs.events(run.id)]
    assert "step.progress" in events


async def test_agent_workflow_with_no_provider_fails_saying_how_to_configure_one(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("RATH_PROVIDER", "RATH_SCRIPT", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    session = await rt.sessions.create([{"kind": "user", "content": "hello agent"}])
    run = await rt.runs.wait((await rt.runs.start("agent", session_id=session.id)).id, 20)
    assert run.status == "failed" and run.output_session_id is None
    assert "no model provider is configured" in (run.error or "")
    assert "RATH_PROVIDER=openai" in (run.error or "") and str(rt.home / "config.json") in (run.error or "")


async def test_agent_workflow_runs_offline_on_the_scripted_provider_when_chosen(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RATH_SCRIPT", raising=False)
    monkeypatch.setenv("RATH_PROVIDER", "scripted")
    session = await rt.sessions.create([{"kind": "user", "content": "hello agent"}])
    run = await rt.runs.wait((await rt.runs.start("agent", session_id=session.id)).id, 20)
    assert run.status == "succeeded", run.error
    assert run.state["answer"] == "(scripted echo) hello agent"
    out = await rt.sessions.get(run.output_session_id or "")
    assert session.id in await rt.sessions.ancestors(out.id)


async def test_agent_workflow_without_a_task_fails_clearly(rt: Runtime) -> None:
    run = await rt.runs.wait((await rt.runs.start("agent")).id, 20)
    assert run.status == "failed" and "give the run a session_id or input.message" in (run.error or "")


async def test_agent_workflow_gets_the_tools_of_mcp_servers_in_config_json(rt: Runtime) -> None:
    config = {"mcp_servers": {"calc": {"command": sys.executable, "args": [SERVER], "tool_prefix": "calc_"}}}
    (rt.home / "config.json").write_text(json.dumps(config))
    script = [{"tool_calls": [{"name": "calc_add", "arguments": {"a": 20, "b": 22}}]}, {"content": "It is 42."}]
    rt.providers.register("default", ScriptedProvider(script))
    run = await rt.runs.wait((await rt.runs.start("agent", input={"message": "20 + 22?"})).id, 30)
    assert run.status == "succeeded", run.error
    out = await rt.sessions.get(run.output_session_id or "")
    assert [(c.name, c.content) for c in out.chunks if c.kind == "tool_result"] == [("calc_add", "42")]


async def test_team_members_take_turns_chosen_by_the_selector(rt: Runtime) -> None:
    script = [
        choose("planner"),
        {"content": "1. coder writes hello.py 2. reviewer checks it"},
        {"content": "coder"},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.py", "content": "print('hi')\n"}}]},
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "python3 hello.py"}}]},
        {"content": "hello.py prints hi"},
        choose("reviewer"),
        {"content": "Done: hello.py prints hi."},
        choose("finish"),
    ]
    rt.providers.register("default", ScriptedProvider(script))
    run = await rt.runs.start("team", input={"message": "Write hello.py that prints hi."})
    run = await rt.runs.wait(run.id, 30)

    assert run.status == "succeeded", run.error
    assert [t["member"] for t in run.state["turns"]] == ["planner", "coder", "reviewer"]
    assert run.state["answer"] == "Done: hello.py prints hi."
    out = await rt.sessions.get(run.output_session_id or "")
    notes = [c.content for c in out.chunks if c.name == "team"]
    assert notes == [
        "[team] next: planner. planner fits",
        "[team] next: coder. named in the model's answer",
        "[team] next: reviewer. reviewer fits",
        "[team] next: finish. finish fits",
    ]
    ran = [json.loads(c.content) for c in out.chunks if c.kind == "tool_result" and c.name == "run_command"]
    assert ran[0]["stdout"] == "hi\n"
    assert out.usage.total_tokens > 0


async def test_team_with_no_provider_fails_before_it_writes_anything(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RATH_PROVIDER", raising=False)
    run = await rt.runs.wait((await rt.runs.start("team", input={"message": "tidy the workspace"})).id, 30)
    assert run.status == "failed" and "no model provider is configured" in (run.error or "")
    assert (await rt.sessions.page())[0] == []  # checked before the session was made from the message


async def test_team_offline_plans_once_then_finishes(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RATH_SCRIPT", raising=False)
    monkeypatch.setenv("RATH_PROVIDER", "scripted")  # the echo: chosen, never a silent default
    run = await rt.runs.start("team", input={"message": "tidy the workspace"})
    run = await rt.runs.wait(run.id, 30)
    assert run.status == "succeeded", run.error
    assert [t["member"] for t in run.state["turns"]] == ["planner"]
    assert run.state["answer"] == "(scripted echo) tidy the workspace"
    out = await rt.sessions.get(run.output_session_id or "")
    assert [c.content.split(".")[0] for c in out.chunks if c.name == "team"] == [
        "[team] next: planner",
        "[team] next: finish",
    ]


async def test_team_stops_at_max_turns(rt: Runtime) -> None:
    rt.providers.register("default", ScriptedProvider([choose("coder"), {"content": "coded"}]))
    run = await rt.runs.start("team", input={"message": "x", "max_turns": 1})
    run = await rt.runs.wait(run.id, 30)
    assert run.status == "succeeded", run.error
    assert [t["member"] for t in run.state["turns"]] == ["coder"] and run.state["why"] == "max_turns (1) reached"
