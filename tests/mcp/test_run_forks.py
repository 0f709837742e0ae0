"""Forking a run from a checkpoint through a real MCP client: ``run_checkpoints`` and ``run_fork``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server import MCPServer

from rath_mcp.server import build_server
from runtime import Runtime
from tests.durable.flows import lines
from tests.mcp.conftest import call, call_error

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(rt: Runtime) -> MCPServer:
    rt.workflows.load("tests.mcp.run_flows")
    return build_server(rt)


async def _failed_pipeline(client: Client, log: Path) -> dict[str, Any]:
    run = await call(client, "run_start", workflow="pipeline", message="ship it", input={"log": str(log)}, wait_s=10)
    assert run["status"] == "failed" and "approved_by" in (run["error"] or "")
    return run


async def test_a_failed_run_is_fixed_with_a_patch_and_continued_without_repeating_earlier_effects(
    client: Client, tmp_path: Path
) -> None:
    log = tmp_path / "effects.log"
    failed = await _failed_pipeline(client, log)
    points = await call(client, "run_checkpoints", run_id=failed["run_id"])
    assert points["run_id"] == failed["run_id"]
    assert [c["next_step"] for c in points["checkpoints"]] == ["build"]  # after fetch; build never completed
    seq = points["checkpoints"][0]["seq"]

    forked = await call(
        client, "run_fork", run_id=failed["run_id"], checkpoint_seq=seq, state_patch={"approved_by": "ana"}, wait_s=10
    )
    assert forked["status"] == "succeeded", forked["error"]
    assert forked["run_id"] != failed["run_id"]
    assert forked["forked_from"] == {"run_id": failed["run_id"], "checkpoint_seq": seq}
    assert forked["result"] == {"shipped": True, "approved_by": "ana"}  # the patch applied
    assert lines(log) == ["fetch", "build for ana", "ship"]  # fetch ran once, in the origin only
    assert (await call(client, "run_get", run_id=failed["run_id"]))["status"] == "failed"  # the origin is untouched

    events = (await call(client, "run_events", run_id=forked["run_id"]))["events"]
    assert events[0]["type"] == "run.created" and events[0]["data"]["forked_from"] == forked["forked_from"]
    assert events[1]["type"] == "run.forked" and events[1]["data"]["patched"] == ["approved_by"]
    started = [e["data"]["step"] for e in events if e["type"] == "step.started"]
    assert started[0] == "build" and "fetch" not in started


async def test_a_forked_run_starts_from_a_fork_of_the_session_as_it_was_at_the_checkpoint(
    client: Client, tmp_path: Path
) -> None:
    failed = await _failed_pipeline(client, tmp_path / "effects.log")
    at_checkpoint = failed["output_session_id"]  # what fetch wrote (the run failed after it)
    forked = await call(client, "run_fork", run_id=failed["run_id"], state_patch={"approved_by": "bo"}, wait_s=10)
    source = await call(client, "session_get", session_id=forked["session_id"])
    assert source["op"] == "fork" and source["parents"] == [at_checkpoint]
    contents = [c["content"] for c in source["chunks"]]
    assert contents == ["ship it", "fetched"]
    out = await call(client, "session_get", session_id=forked["output_session_id"])
    assert [c["content"] for c in out["chunks"]] == ["ship it", "fetched", "shipped"]
    lineage = await call(client, "session_lineage", session_id=forked["output_session_id"])
    assert at_checkpoint in {n["id"] for n in lineage["nodes"]}  # the branch hangs off the origin's session


async def test_a_rejected_approval_forked_from_its_question_is_asked_again_and_can_be_approved(client: Client) -> None:
    run = await call(client, "run_start", workflow="approval", input={"draft": "v1"}, wait_s=10)
    (pending,) = run["pending_interrupts"]
    await call(client, "interrupt_resolve", interrupt_id=pending["interrupt_id"], action="reject", reason="no")
    rejected = await call(client, "run_wait", run_id=run["run_id"], timeout_s=10)
    assert rejected["result"]["outcome"] == "rejected"
    points = (await call(client, "run_checkpoints", run_id=run["run_id"]))["checkpoints"]
    assert [c["next_step"] for c in points] == ["review", "review", "route", None]  # asked, decided, …, ended
    asked = await call(client, "run_fork", run_id=run["run_id"], checkpoint_seq=points[0]["seq"], wait_s=10)
    assert asked["status"] == "waiting"
    (again,) = asked["pending_interrupts"]
    assert again["interrupt_id"] != pending["interrupt_id"]  # a question of its own
    await call(client, "interrupt_resolve", interrupt_id=again["interrupt_id"], action="approve")
    approved = await call(client, "run_wait", run_id=asked["run_id"], timeout_s=10)
    assert approved["result"]["outcome"] == "approved"
    assert (await call(client, "run_get", run_id=run["run_id"]))["result"]["outcome"] == "rejected"


async def test_a_patch_is_a_json_merge_patch_and_null_deletes(client: Client, tmp_path: Path) -> None:
    failed = await _failed_pipeline(client, tmp_path / "effects.log")
    patch = {"approved_by": "cy", "fetched": None, "extra": {"deep": 1}}
    forked = await call(client, "run_fork", run_id=failed["run_id"], state_patch=patch, wait_s=10)
    assert forked["status"] == "succeeded"
    resource = await client.read_resource(f"rath://runs/{forked['run_id']}")
    state = json.loads(getattr(resource.contents[0], "text", ""))["state"]
    assert "fetched" not in state and state["extra"] == {"deep": 1} and state["approved_by"] == "cy"


async def test_bad_forks_say_what_to_fix_and_start_nothing(client: Client, tmp_path: Path) -> None:
    failed = await _failed_pipeline(client, tmp_path / "effects.log")
    assert "no checkpoint 999" in await call_error(client, "run_fork", run_id=failed["run_id"], checkpoint_seq=999)
    assert "no run run_nope" in await call_error(client, "run_fork", run_id="run_nope")
    done = await call(client, "run_start", workflow="echo", message="hi", wait_s=10)
    (end,) = (await call(client, "run_checkpoints", run_id=done["run_id"]))["checkpoints"]
    assert end["next_step"] is None
    message = await call_error(client, "run_fork", run_id=done["run_id"])
    assert "where it finished" in message and "run_checkpoints" in message
    runs = (await call(client, "run_list"))["runs"]
    assert len(runs) == 2  # nothing was started by the refused forks
