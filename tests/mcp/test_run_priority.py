"""``run_start``'s ``priority`` and the queued-run quota through a real MCP client (CONTRACT §15)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from rath_mcp.cli import build_parser
from rath_mcp.server import build_server
from runtime import Runtime
from tests.mcp.conftest import call, call_error

pytestmark = pytest.mark.anyio


async def test_priority_is_kept_and_shown(client: Client, rt: Runtime) -> None:
    run = await call(client, "run_start", workflow="echo", message="urgent", priority=90)
    assert run["priority"] == 90
    assert (await call(client, "run_get", run_id=run["run_id"]))["priority"] == 90
    plain = await call(client, "run_start", workflow="echo", message="whenever")
    assert plain["priority"] == 0


@pytest.mark.parametrize("priority", [101, -101, "5", 1.5, True])
async def test_a_priority_out_of_range_or_not_a_whole_number_is_refused(client: Client, priority: Any) -> None:
    text = await call_error(client, "run_start", workflow="echo", message="x", priority=priority)
    assert "priority" in text
    assert (await call(client, "run_list"))["runs"] == []


async def test_the_same_idempotent_request_with_another_priority_conflicts(rt: Runtime) -> None:
    first = await rt.runs.start("echo", input={"message": "a"}, idempotency_key="k1")
    assert (await rt.runs.start("echo", input={"message": "a"}, idempotency_key="k1")).id == first.id
    with pytest.raises(Exception, match="priority"):
        await rt.runs.start("echo", input={"message": "a"}, idempotency_key="k1", priority=7)


async def test_run_start_beyond_the_queued_quota_names_the_limit_and_the_count(tmp_path: Path) -> None:
    async with Runtime.open(tmp_path, workers=0, max_queued_runs=2) as rt, Client(build_server(rt)) as client:
        for _ in range(2):
            await call(client, "run_start", workflow="echo", message="queued")
        text = await call_error(client, "run_start", workflow="echo", message="one too many")
        assert "has 2 queued runs, at its limit of 2 (--max-queued-runs)" in text
        assert len((await call(client, "run_list"))["runs"]) == 2


def test_serve_takes_max_queued_runs() -> None:
    assert build_parser().parse_args(["serve", "--max-queued-runs", "5"]).max_queued_runs == 5
    assert build_parser().parse_args(["serve"]).max_queued_runs == 1000
