"""A second, independent client: the TypeScript MCP SDK (Node) runs the key scenario against rath-mcp.

``tests/node/scenario.mjs`` prints one JSON line per step; these tests run it over stdio (Node spawns
``rath-mcp serve``) and over Streamable HTTP (against ``rath-mcp serve --transport http`` on a free
port of 127.0.0.1), then check every step's facts. Missing Node or its packages is a failure that
says how to fix it, never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.transports._servers import http_server, serve_command

pytestmark = pytest.mark.anyio

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
SCENARIO = NODE_DIR / "scenario.mjs"
STEPS = [
    "connect",
    "create",
    "fork",
    "merge",
    "transcript",
    "run_start",
    "interrupt_resolve",
    "run_wait",
    "memory_recall",
]
SETUP_HINT = "run `bash tests/node/setup.sh` (needs node >= 18 and npm) to install the Node MCP client"


def node_binary() -> str:
    node = shutil.which("node")
    assert node is not None, f"node is not on PATH; {SETUP_HINT}"
    sdk = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
    assert sdk.is_file(), f"{sdk} is missing; {SETUP_HINT}"
    return node


async def run_scenario(*args: str, home: Path) -> dict[str, dict[str, Any]]:
    """Run the Node scenario; return its steps by name, failing with its output if any step failed."""
    env = {**os.environ, "RATH_HOME": str(home)}
    with anyio.fail_after(60):
        done = await anyio.run_process([node_binary(), str(SCENARIO), *args], env=env, check=False)
    out, err = done.stdout.decode(), done.stderr.decode()[-3000:]
    steps = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    failed = [s for s in steps if not s["ok"]]
    assert done.returncode == 0 and not failed, f"node scenario failed (rc {done.returncode}): {failed}\n{out}\n{err}"
    return {step["step"]: step for step in steps}


def check_scenario(steps: dict[str, dict[str, Any]], transport: str) -> None:
    """Every step ran and produced what the contract promises."""
    assert list(steps) == STEPS
    assert steps["connect"]["transport"] == transport
    assert steps["connect"]["server"] == "rath-mcp"
    assert steps["connect"]["tools"] >= 20
    assert steps["create"]["session_id"].startswith("ses_")
    assert len(set(steps["fork"]["session_ids"])) == 2
    assert steps["merge"]["contents"] == ["plan a picnic", "the park", "the beach"]
    assert len(steps["merge"]["parents"]) == 2
    assert steps["transcript"]["mime_type"] == "text/markdown"
    transcript = steps["transcript"]["text"]
    assert transcript.index("plan a picnic") < transcript.index("the park") < transcript.index("the beach")
    assert steps["run_start"]["status"] == "waiting"
    assert steps["run_start"]["interrupts"] == ["approval"]
    assert steps["interrupt_resolve"]["interrupt_id"].startswith("int_")
    assert steps["run_wait"]["status"] == "succeeded"
    assert steps["run_wait"]["pending"] == 0
    assert steps["memory_recall"]["hits"][0] == steps["memory_recall"]["remembered"]


async def test_node_client_runs_the_scenario_over_stdio(home: Path) -> None:
    steps = await run_scenario("--transport", "stdio", "--", *serve_command("stdio", home), home=home)
    check_scenario(steps, "stdio")


async def test_node_client_runs_the_scenario_over_streamable_http(home: Path) -> None:
    async with http_server("http", home) as server:
        steps = await run_scenario("--transport", "http", "--url", f"{server.base}/mcp", home=home)
    check_scenario(steps, "http")
