"""State survives a server restart: a session and a waiting run made before are there after.

Each "server" is a separate runtime and server on the same home, closed before the next opens,
like a host restarting ``rath-mcp serve``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from rath_mcp.server import build_server
from runtime import Runtime
from tests.mcp.conftest import call

pytestmark = pytest.mark.anyio


async def test_a_session_and_a_waiting_run_survive_a_server_restart(tmp_path: Path, era: str) -> None:
    home = tmp_path / "home"
    async with Runtime.open(home) as rt, Client(build_server(rt), mode=era) as client:
        sid = (await call(client, "session_create", message="Draft the launch post."))["session_id"]
        run = await call(client, "run_start", workflow="approval", session_id=sid, wait_s=10)
        assert run["status"] == "waiting"
        interrupt_id = run["pending_interrupts"][0]["interrupt_id"]

    async with Runtime.open(home) as rt, Client(build_server(rt), mode=era) as client:
        page = await call(client, "session_get", session_id=sid)
        assert [c["content"] for c in page["chunks"]] == ["Draft the launch post."]
        again = await call(client, "run_get", run_id=run["run_id"])
        assert again["status"] == "waiting"
        assert [i["interrupt_id"] for i in again["pending_interrupts"]] == [interrupt_id]
        await call(client, "interrupt_resolve", interrupt_id=interrupt_id, action="approve")
        done = await call(client, "run_wait", run_id=run["run_id"], timeout_s=20)
        assert done["status"] == "succeeded" and done["output_session_id"]
        out = await call(client, "session_get", session_id=done["output_session_id"])
        assert out["chunks"][-1]["kind"] == "assistant"
