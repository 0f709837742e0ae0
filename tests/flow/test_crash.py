"""A worker killed while an agent's command runs: the command is not run again blindly; the run needs review."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from runtime import Runtime

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio


async def test_killed_mid_command_the_agent_run_needs_review_and_earlier_work_is_kept(home: Path) -> None:
    script = home / "script.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "write_file", "arguments": {"path": "plan.txt", "content": "step 1"}}]},
                {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo run >> ran.log; sleep 20"}}]},
                {"content": "never reached"},
            ]
        )
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RATH_PROVIDER": "scripted", "RATH_SCRIPT": str(script)}
    async with Runtime.open(home, workers=0) as rt:
        run = await rt.runs.start("agent", input={"message": "plan, then run the long job"})
        command = [sys.executable, "-m", "tests.flow.crash_worker", str(home)]
        async with await anyio.open_process(command, cwd=ROOT, env=env) as worker:
            try:
                workspace = await rt.sandboxes.get(rt.sandboxes.placement())
                with anyio.fail_after(30):
                    while not await workspace.exists("ran.log"):  # noqa: ASYNC110 - another process writes it
                        await anyio.sleep(0.05)
            finally:
                worker.kill()
                await worker.wait()

    async with Runtime.open(home, workers=1, lease_s=3600.0) as rt:  # a new worker sees the holder gone
        run = await rt.runs.wait(run.id, 30)
        assert run.status == "needs_review", run.error
        (ambiguous,) = await rt.runs.effects(status="ambiguous", run_id=run.id)
        assert ambiguous.key == "agent.2.tool.0"  # the command in flight; the write before it had completed
        workspace = await rt.sandboxes.get(rt.sandboxes.placement())
        assert await workspace.read_file("ran.log") == b"run\n"  # started once, never re-run blindly
        assert await workspace.read_file("plan.txt") == b"step 1"
