"""What a run produced, through a real MCP client: ``result`` in every summary, and output sessions
whose transcript records each question a run asked a human and the decision."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client
from mcp.server import MCPServer

from rath_mcp.server import build_server
from runtime import Runtime
from tests.mcp.conftest import call

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(rt: Runtime) -> MCPServer:
    rt.workflows.load("tests.mcp.run_flows")
    return build_server(rt)


async def _decided(client: Client, action: str, value: Any = None, reason: str | None = None) -> dict[str, Any]:
    """An approval run of a draft, parked, then decided with ``action``; returns the finished summary."""
    run = await call(
        client, "run_start", workflow="approval", message="write the note", input={"draft": "v1"}, wait_s=10
    )
    assert run["status"] == "waiting" and run["result"] is None  # null until it succeeds
    (pending,) = run["pending_interrupts"]
    args: dict[str, Any] = {"interrupt_id": pending["interrupt_id"], "action": action}
    if value is not None:
        args["value"] = value
    if reason is not None:
        args["reason"] = reason
    await call(client, "interrupt_resolve", **args)
    return await call(client, "run_wait", run_id=run["run_id"], timeout_s=10)


async def _transcript(client: Client, session_id: str) -> list[tuple[str, str | None, str]]:
    page = await call(client, "session_get", session_id=session_id, limit=200)
    return [(c["kind"], c.get("name"), c["content"]) for c in page["chunks"]]


async def test_an_approved_run_says_so_and_its_transcript_holds_the_question_the_decision_and_the_draft(
    client: Client,
) -> None:
    done = await _decided(client, "approve", reason="reads well")
    assert done["status"] == "succeeded"
    actor = done["result"]["decided_by"]
    assert actor.startswith("mcp-client")  # who decided: the client that answered
    assert done["result"] == {"outcome": "approved", "draft": "v1", "decided_by": actor, "reason": "reads well"} | {
        "revision": 1
    }
    chunks = await _transcript(client, done["output_session_id"])
    assert [(kind, name) for kind, name, _ in chunks] == [
        ("user", None),
        ("assistant", "interrupt"),
        ("user", "decision"),
        ("assistant", None),
    ]
    assert "Approve this draft" in chunks[1][2] and chunks[3][2] == "v1"
    assert f"by {actor}] approve (reason: reads well)" in chunks[2][2]


async def test_an_edited_run_reports_edited_with_the_new_draft(client: Client) -> None:
    done = await _decided(client, "edit", value="v1, shorter", reason="too long")
    assert done["result"]["outcome"] == "edited" and done["result"]["draft"] == "v1, shorter"
    assert done["result"]["reason"] == "too long"
    chunks = await _transcript(client, done["output_session_id"])
    assert "edit: v1, shorter (reason: too long)" in chunks[2][2] and chunks[-1][2] == "v1, shorter"


async def test_a_rejected_run_has_an_output_session_and_a_result_that_says_rejected(client: Client) -> None:
    done = await _decided(client, "reject", reason="not now")
    assert done["status"] == "succeeded" and done["output_session_id"] is not None
    assert done["result"]["outcome"] == "rejected" and done["result"]["reason"] == "not now"
    chunks = await _transcript(client, done["output_session_id"])
    assert [name for _, name, _ in chunks] == [None, "interrupt", "decision"]
    assert "reject (reason: not now)" in chunks[-1][2]


async def test_a_response_loops_for_a_revision_and_the_transcript_shows_both_rounds(client: Client) -> None:
    asked = await _decided(client, "respond", value="add the date")
    assert asked["status"] == "waiting" and asked["result"] is None
    (second,) = asked["pending_interrupts"]
    assert "revised after feedback: add the date" in second["prompt"]
    await call(client, "interrupt_resolve", interrupt_id=second["interrupt_id"], action="approve")
    done = await call(client, "run_wait", run_id=asked["run_id"], timeout_s=10)
    assert done["result"]["outcome"] == "approved" and done["result"]["revision"] == 2
    names = [name for _, name, _ in await _transcript(client, done["output_session_id"])]
    assert names == [None, "interrupt", "decision", "interrupt", "decision", None]


async def test_echo_reports_what_it_echoed_in_every_view_of_the_run(client: Client) -> None:
    run = await call(client, "run_start", workflow="echo", message="hello", wait_s=10)
    assert run["result"] == {"echoed": "hello"} and run["forked_from"] is None
    assert (await call(client, "run_get", run_id=run["run_id"]))["result"] == {"echoed": "hello"}
    listed = (await call(client, "run_list", workflow="echo"))["runs"]
    assert [r["result"] for r in listed] == [{"echoed": "hello"}]
    resource = await client.read_resource(f"rath://runs/{run['run_id']}")
    body = json.loads(getattr(resource.contents[0], "text", ""))
    assert body["result"] == {"echoed": "hello"} and body["forked_from"] is None


async def test_delegate_hands_back_the_result_with_the_answer(client: Client) -> None:
    done = await call(client, "delegate", task="say this back", workflow="echo", wait_s=10)
    assert done["answer"] == "say this back" and done["result"] == {"echoed": "say this back"}


async def test_a_workflow_without_a_result_hook_reports_its_final_state_and_gets_an_output_session(
    client: Client,
) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    summary_schema = tools["run_get"].output_schema or {}
    assert {"result", "forked_from"} <= set(summary_schema["properties"])
    run = await call(client, "run_start", workflow="plain", input={"n": 1}, wait_s=10)
    assert run["status"] == "succeeded" and run["result"] == {"n": 1, "done": True}
    out = await call(client, "session_get", session_id=run["output_session_id"])  # no input session, yet one out
    assert out["chunks"] == []
