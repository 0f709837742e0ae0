"""An independent client: the TypeScript SDK's 2025-11-25 tasks support runs a task to completion.

``tests/node/tasks.mjs`` (``client.experimental.tasks.callToolStream``) calls ``run_start`` as a task
against ``rath-mcp serve --transport http``; the approval it hits is asked through ``tasks/result``
as an elicitation tied to the task and answered there; the stream ends with the tool's result.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.transports._servers import http_server
from tests.transports.test_node_client import NODE_DIR, node_binary

pytestmark = pytest.mark.anyio


async def test_the_typescript_sdk_runs_a_task_to_completion_answering_its_approval(tmp_path: Path) -> None:
    async with http_server("http", tmp_path / "home") as server:
        with anyio.fail_after(60):
            done = await anyio.run_process(
                [node_binary(), str(NODE_DIR / "tasks.mjs"), "--url", f"{server.base}/mcp"], check=False
            )
    out, err = done.stdout.decode(), done.stderr.decode()[-3000:]
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines and lines[-1]["ok"], f"rc {done.returncode}\n{out}\n{err}"
    types = [line.get("type") for line in lines[:-1]]
    assert types[0] == "taskCreated" and types[-1] == "result"
    assert "input_required" in [line.get("status") for line in lines[:-1]]
    final = lines[-1]
    assert final["task"]["status"] == "completed" and final["task"]["ttl"] == 60000 and final["listed"]
    assert final["elicited"] == [final["taskId"]]  # the approval was asked tied to the task
    assert final["result"]["structuredContent"]["status"] == "succeeded"
    assert final["result"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": final["taskId"]}
