"""An ambiguous effect settled through MCP: a worker process dies inside a non-idempotent effect.

A real ``rath-mcp worker`` process runs the step and is SIGKILLed mid-effect; a server on the
same store then finds the run ``needs_review``, and a client settles the effect with
``effect_list`` and ``effect_resolve`` so the run finishes without doing the effect twice.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from rath_mcp.server import build_server
from runtime import Runtime
from tests.mcp.conftest import call

pytestmark = pytest.mark.anyio
FLOWS = "tests.durable.flows"  # the durable layer's test workflows (effects append lines to a log file)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_an_ambiguous_effect_is_listed_and_settled_through_mcp(tmp_path: Path) -> None:
    home, log, gate = tmp_path / "home", tmp_path / "log", tmp_path / "gate"
    gate.touch()
    async with Runtime.open(home, workers=0) as rt:
        rt.workflows.load(FLOWS)
        async with Client(build_server(rt), mode="legacy") as client:
            run = await call(client, "run_start", workflow="ledger", input={"log": str(log), "effect_gate": str(gate)})
        command = [sys.executable, "-m", "rath_mcp", "worker", "--home", str(home), "--workflows", FLOWS]
        worker = await anyio.open_process([*command, "--lease-s", "1"], stderr=subprocess.DEVNULL)
        async with worker:
            with anyio.fail_after(30):  # another process writes the log: poll it
                while "c-start" not in _lines(log):  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            worker.send_signal(signal.SIGKILL)
            await worker.wait()
    gate.unlink()

    async with Runtime.open(home, lease_s=1.0) as rt:
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
    assert _lines(log) == ["a", "b", "c-start", "done"]  # c was not run a second time
