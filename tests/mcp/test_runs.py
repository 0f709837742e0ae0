"""Durable runs through a real MCP client: start, wait, cancel, list, events, interrupts, effects, delegate."""

from __future__ import annotations

import pytest
from mcp import Client

from tests.mcp.conftest import call, call_error

pytestmark = pytest.mark.anyio

RUN_TOOLS = {
    "workflow_list",
    "run_start",
    "run_get",
    "run_wait",
    "run_cancel",
    "run_list",
    "run_events",
    "interrupt_list",
    "interrupt_resolve",
    "effect_list",
    "effect_resolve",
    "delegate",
}


async def test_every_run_tool_is_listed_with_an_output_schema(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) >= RUN_TOOLS
    assert all(tools[name].output_schema for name in RUN_TOOLS)
    assert "wait_s" in tools["run_start"].input_schema["properties"]


async def test_workflow_list_describes_the_shipped_offline_workflows(client: Client) -> None:
    workflows = {w["name"]: w for w in (await call(client, "workflow_list"))["workflows"]}
    assert {"echo", "approval"} <= set(workflows)
    assert workflows["echo"]["description"] and workflows["echo"]["input_schema"]["type"] == "object"
    assert [s["name"] for s in workflows["approval"]["steps"]][:2] == ["draft", "review"]


async def test_run_start_with_wait_returns_the_finished_run_and_its_output_session(client: Client) -> None:
    run = await call(client, "run_start", workflow="echo", message="hello there", wait_s=10)
    assert run["status"] == "succeeded" and run["hint"] is None
    assert run["run_id"].startswith("run_") and run["session_id"].startswith("ses_")
    out = await call(client, "session_get", session_id=run["output_session_id"])
    assert out["chunks"][-1] == {"kind": "assistant", "content": "hello there", "trust": "model"}


async def test_run_start_without_wait_returns_a_handle_that_run_wait_completes(client: Client) -> None:
    run = await call(client, "run_start", workflow="echo", input={"message": "later"})
    assert run["status"] in ("queued", "running", "succeeded")
    done = await call(client, "run_wait", run_id=run["run_id"], timeout_s=10)
    assert done["status"] == "succeeded" and done["run_id"] == run["run_id"]


async def test_run_start_appends_the_message_to_a_given_session(client: Client) -> None:
    sid = (await call(client, "session_create", system="sys"))["session_id"]
    run = await call(client, "run_start", workflow="echo", session_id=sid, message="from the run", wait_s=10)
    source = await call(client, "session_get", session_id=run["session_id"])
    assert source["parents"] == [sid] and source["chunks"][-1]["content"] == "from the run"


async def test_the_same_idempotency_key_returns_the_same_run(client: Client) -> None:
    first = await call(client, "run_start", workflow="echo", input={"message": "x"}, idempotency_key="k1")
    again = await call(client, "run_start", workflow="echo", input={"message": "x"}, idempotency_key="k1")
    assert again["run_id"] == first["run_id"]
    text = await call_error(client, "run_start", workflow="echo", input={"message": "y"}, idempotency_key="k1")
    assert "idempotency key" in text and "new key" in text


async def test_unknown_workflows_are_refused_with_the_known_names(client: Client) -> None:
    text = await call_error(client, "run_start", workflow="nope", message="x")
    assert "nope" in text and "echo" in text
    assert (await call(client, "run_list"))["runs"] == []


async def test_input_that_breaks_the_workflow_schema_is_refused(client: Client) -> None:
    text = await call_error(client, "run_start", workflow="echo", input={"message": 42})
    assert "schema" in text and "message" in text


async def test_an_approval_run_waits_with_its_interrupt_and_resumes_after_interrupt_resolve(client: Client) -> None:
    run = await call(client, "run_start", workflow="approval", input={"draft": "Ship it"}, wait_s=10)
    assert run["status"] == "waiting" and len(run["pending_interrupts"]) == 1
    interrupt = run["pending_interrupts"][0]
    assert interrupt["kind"] == "approval" and "Ship it" in interrupt["prompt"]
    assert interrupt["interrupt_id"] in run["hint"]
    listed = (await call(client, "interrupt_list", run_id=run["run_id"]))["interrupts"]
    assert [i["interrupt_id"] for i in listed] == [interrupt["interrupt_id"]]
    queued = await call(client, "interrupt_resolve", interrupt_id=interrupt["interrupt_id"], action="approve")
    assert queued["status"] in ("queued", "running", "succeeded") and queued["pending_interrupts"] == []
    done = await call(client, "run_wait", run_id=run["run_id"], timeout_s=10)
    assert done["status"] == "succeeded"
    assert (await call(client, "interrupt_list"))["interrupts"] == []
    events = (await call(client, "run_events", run_id=run["run_id"]))["events"]
    decided = [e["data"] for e in events if e["type"] == "interrupt.decided"]
    assert decided[0]["action"] == "approve" and decided[0]["actor"].startswith("mcp-client")


async def test_resolving_an_interrupt_twice_is_a_conflict(client: Client) -> None:
    run = await call(client, "run_start", workflow="approval", input={"draft": "d"}, wait_s=10)
    iid = run["pending_interrupts"][0]["interrupt_id"]
    await call(client, "interrupt_resolve", interrupt_id=iid, action="reject", reason="no")
    assert "already decided" in await call_error(client, "interrupt_resolve", interrupt_id=iid, action="approve")
    assert "interrupt_list" in await call_error(
        client, "interrupt_resolve", interrupt_id="int_missing", action="approve"
    )


async def test_run_cancel_stops_a_waiting_run_and_expires_its_interrupt(client: Client) -> None:
    run = await call(client, "run_start", workflow="approval", input={"draft": "d"}, wait_s=10)
    cancelled = await call(client, "run_cancel", run_id=run["run_id"], reason="changed my mind")
    assert cancelled["status"] == "cancelled" and "changed my mind" in cancelled["error"]
    assert cancelled["pending_interrupts"] == []
    assert (await call(client, "run_cancel", run_id=run["run_id"]))["status"] == "cancelled"


async def test_run_list_filters_by_status_and_workflow_newest_first(client: Client) -> None:
    echo = await call(client, "run_start", workflow="echo", message="a", wait_s=10)
    waiting = await call(client, "run_start", workflow="approval", input={"draft": "b"}, wait_s=10)
    everything = [r["run_id"] for r in (await call(client, "run_list"))["runs"]]
    assert everything == [waiting["run_id"], echo["run_id"]]
    only_waiting = (await call(client, "run_list", status="waiting"))["runs"]
    assert [r["run_id"] for r in only_waiting] == [waiting["run_id"]]
    only_echo = (await call(client, "run_list", workflow="echo"))["runs"]
    assert [r["run_id"] for r in only_echo] == [echo["run_id"]]
    assert "status" in await call_error(client, "run_list", status="sleeping")


async def test_run_events_pages_through_the_ordered_event_log(client: Client) -> None:
    run = await call(client, "run_start", workflow="echo", message="e", wait_s=10)
    page = await call(client, "run_events", run_id=run["run_id"], limit=2)
    assert [e["seq"] for e in page["events"]] == [1, 2] and page["events"][0]["type"] == "run.created"
    rest = await call(client, "run_events", run_id=run["run_id"], after_seq=page["next_after_seq"])
    assert rest["events"][0]["seq"] == 3
    types = [e["type"] for e in page["events"] + rest["events"]]
    assert "step.completed" in types


async def test_effect_list_is_empty_when_nothing_is_ambiguous(client: Client) -> None:
    await call(client, "run_start", workflow="echo", message="e", wait_s=10)
    assert (await call(client, "effect_list"))["effects"] == []
    succeeded = (await call(client, "effect_list", status="succeeded"))["effects"]
    assert succeeded and succeeded[0]["effect_id"].startswith("eff_")
    text = await call_error(client, "effect_resolve", effect_id=succeeded[0]["effect_id"], outcome="applied")
    assert "not ambiguous" in text


async def test_delegate_returns_the_final_answer_in_one_call(client: Client) -> None:
    result = await call(client, "delegate", task="summarise: durable runs survive restarts", workflow="echo")
    assert result["status"] == "succeeded"
    assert result["answer"] == "summarise: durable runs survive restarts"
    assert result["run_id"].startswith("run_") and result["session_id"].startswith("ses_")


async def test_delegate_to_a_run_that_waits_on_a_human_returns_the_handle(client: Client) -> None:
    result = await call(client, "delegate", task="publish this", workflow="approval", wait_s=10)
    assert result["answer"] is None and result["status"] == "waiting"
    assert result["pending_interrupts"] and "interrupt_resolve" in result["hint"]


async def test_unknown_run_ids_say_how_to_find_one(client: Client) -> None:
    text = await call_error(client, "run_get", run_id="run_missing")
    assert "run_missing" in text


async def test_delegate_defaults_to_the_agent_workflow_which_runs_offline_on_scripted(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATH_PROVIDER", "scripted")  # chosen: with nothing configured delegate fails instead
    result = await call(client, "delegate", task="Say hello back.", wait_s=30)
    assert result["status"] == "succeeded", result["error"]
    assert result["answer"] and result["session_id"].startswith("ses_")
    run = await call(client, "run_get", run_id=result["run_id"])
    assert run["workflow"] == "agent"
