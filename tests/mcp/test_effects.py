"""An ambiguous effect settled through MCP: a worker process dies inside a non-idempotent effect.

A real ``rath-mcp worker`` process runs the step and is SIGKILLed mid-effect; a server on the
same store then finds the run ``needs_review``, and a client settles the effect with
``effect_list`` and ``effect_resolve`` so the run finishes without doing the effect twice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from rath_mcp.server import build_server
from runtime import Runtime
from tests.mcp.ambiguous import FLOWS, kill_worker_mid_effect, lines
from tests.mcp.conftest import call

pytestmark = pytest.mark.anyio


async def test_an_ambiguous_effect_is_listed_and_settled_through_mcp(tmp_path: Path) -> None:
    home, log = tmp_path / "home", tmp_path / "log"
    run = {"run_id": await kill_worker_mid_effect(home, log, tmp_path / "gate")}

    async with Runtime.open(home, lease_s=3600.0) as rt:
        rt.workflows.load(FLOWS)
        async with Client(build_server(rt), mode="2026-07-28") as client:
            review = await call(client, "run_wait", run_id=run["run_id"], timeout_s=20)
            assert review["status"] == "needs_review" and "effect_resolve" in review["hint"]
            (effect,) = (await call(client, "effect_list"))["effects"]
            assert effect["key"] == "c" and effect["run_id"] == run["run_id"] and effect["status"] == "ambiguous"
            resumed = await call(
                client, "effect_resolve", effect_id=effect["effect_id"], outcome="applied", result="c-x"
            )
            assert resumed["status"] in ("queued", "running", "succeeded")
            done = await call(client, "run_wait", run_id=run["run_id"], timeout_s=20)
            assert done["status"] == "succeeded", done["error"]
            assert (await call(client, "effect_list"))["effects"] == []
            body = (await client.read_resource(f"rath://runs/{run['run_id']}")).contents[0]
            assert json.loads(body.text)["state"]["results"] == ["a", "b", "c-x"]  # type: ignore[union-attr]
    assert lines(log) == ["a", "b", "c-start", "done"]  # c was not run a second time
