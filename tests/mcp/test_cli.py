"""The ``rath-mcp`` command, run as a real subprocess: demo, migrate, inspection, worker.

Transports (``serve`` over stdio/HTTP/SSE) are exercised by tests/transports; these cover the rest.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from runtime import Runtime
from runtime.store.sqlite.database import apply_migrations
from runtime.store.sqlite.migrations import ALL_MIGRATIONS

pytestmark = pytest.mark.anyio


async def rath(*args: str, home: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("RATH_HOME", None)
    command = [sys.executable, "-m", "rath_mcp", *args, *(["--home", str(home)] if home else [])]
    return await anyio.run_process(command, check=False, env=env)


async def test_demo_tours_the_server_offline_and_exits_zero() -> None:
    done = await rath("demo")
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    phrases = ("session_fork", "session_merge", "is waiting at step review", "succeeded", "memory_recall", "graph TD")
    for phrase in phrases:
        assert phrase in out, phrase


async def test_migrate_check_reports_pending_then_migrate_applies_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    check = await rath("migrate", "--check", home=home)
    assert check.returncode == 1 and b"there is no store at" in check.stderr and not home.exists()
    applied = await rath("migrate", home=home)
    assert applied.returncode == 0 and b"applied:" in applied.stdout and b"created" in applied.stdout
    old = tmp_path / "old"  # a store an older version wrote: all migrations but the last
    old.mkdir()
    with closing(sqlite3.connect(old / "rath.db", isolation_level=None)) as conn:
        apply_migrations(conn, ALL_MIGRATIONS[:-1])
    home, last = old, ALL_MIGRATIONS[-1].name
    check = await rath("migrate", "--check", home=home)
    assert check.returncode == 1 and f"pending: {last}".encode() in check.stdout
    applied = await rath("migrate", home=home)
    assert applied.returncode == 0 and f"applied: {last}".encode() in applied.stdout
    again = await rath("migrate", "--check", home=home)
    assert again.returncode == 0 and b"up to date" in again.stdout


async def test_sessions_and_runs_can_be_inspected_from_the_shell(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with Runtime.open(home, workers=0) as rt:
        base = await rt.sessions.create([{"kind": "user", "content": "shell hello"}])
        fork = (await rt.sessions.fork(base.id))[0]
        run = await rt.runs.start("echo", session_id=base.id)
    listed = await rath("sessions", "list", home=home)
    assert listed.returncode == 0 and base.id.encode() in listed.stdout and fork.id.encode() in listed.stdout
    shown = await rath("sessions", "show", base.id, home=home)
    assert shown.returncode == 0 and b"shell hello" in shown.stdout
    lineage = await rath("sessions", "lineage", fork.id, home=home)
    assert lineage.returncode == 0 and f"{base.id} --> {fork.id}".encode() in lineage.stdout
    runs = await rath("runs", "list", home=home)
    assert runs.returncode == 0 and run.id.encode() in runs.stdout and b"queued" in runs.stdout
    one = await rath("runs", "show", run.id, home=home)
    assert one.returncode == 0 and b'"run.created"' in one.stdout


async def test_a_domain_error_is_one_clear_line_and_exit_code_one(tmp_path: Path) -> None:
    assert (await rath("migrate", home=tmp_path / "home")).returncode == 0
    done = await rath("sessions", "show", "ses_missing", home=tmp_path / "home")
    assert done.returncode == 1 and done.stdout == b""
    note, error = done.stderr.decode().strip().splitlines()  # which store it read, then the error
    assert note.startswith("rath-mcp: reading the store")
    assert error.startswith("rath-mcp: error:") and "ses_missing" in error and "`rath-mcp sessions list`" in error


async def test_state_goes_to_rath_home_when_no_home_is_given(tmp_path: Path) -> None:
    env = {**os.environ, "RATH_HOME": str(tmp_path / "from-env")}
    done = await anyio.run_process([sys.executable, "-m", "rath_mcp", "migrate"], check=False, env=env, cwd=tmp_path)
    assert done.returncode == 0 and (tmp_path / "from-env" / "rath.db").exists()
    assert not (tmp_path / ".rath").exists()


async def test_a_worker_process_drives_runs_on_a_shared_store_and_stops_on_sigterm(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with Runtime.open(home, workers=0) as rt:
        run = await rt.runs.start("echo", input={"message": "from another process"})
        command = [sys.executable, "-m", "rath_mcp", "worker", "--home", str(home), "--workers", "2"]
        async with await anyio.open_process(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as worker:
            done = await rt.runs.wait(run.id, 30)  # notices the other process's commits by polling the store
            assert done.status == "succeeded"
            worker.send_signal(signal.SIGTERM)
            with anyio.fail_after(15):
                assert await worker.wait() == 0


WORKFLOW_FILE = '''
from runtime import Workflow, step


class Shout(Workflow):
    """Reply with the message in capitals."""

    name = "shout"

    @step(entry=True)
    async def shout(self, state, ctx):
        return {**state, "reply": str(state.get("message", "")).upper()}
'''


async def test_serve_over_stdio_loads_workflows_from_a_file(tmp_path: Path) -> None:
    flows = tmp_path / "flows.py"
    flows.write_text(WORKFLOW_FILE)
    args = ["-m", "rath_mcp", "serve", "--home", str(tmp_path / "home"), "--workflows", str(flows)]
    params = StdioServerParameters(command=sys.executable, args=args, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    async with Client(params, mode="legacy") as client:
        listed = await client.call_tool("workflow_list", {})
        assert listed.structured_content is not None
        assert "shout" in {w["name"] for w in listed.structured_content["workflows"]}
        run = await client.call_tool("run_start", {"workflow": "shout", "input": {"message": "hi"}, "wait_s": 20})
        assert run.structured_content is not None and run.structured_content["status"] == "succeeded"


async def test_serve_over_http_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "rath_mcp", "serve", "--transport", "http", "--port", "0"]
    server = await anyio.open_process([*command, "--home", str(tmp_path / "home")], stderr=subprocess.PIPE)
    async with server:
        assert server.stderr is not None
        seen = b""
        with anyio.fail_after(30):
            while b"/mcp\n" not in seen:
                seen += await server.stderr.receive()
        # the /mcp line may come in one read with the viewer's line after it: take that line alone
        line = next(part for part in seen.decode().splitlines() if part.endswith("/mcp"))
        url = line.split(" on ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        async with Client(url, mode="legacy") as client:
            created = await client.call_tool("session_create", {"message": "over http"})
            assert created.structured_content is not None
        server.send_signal(signal.SIGTERM)
        with anyio.fail_after(15):
            assert await server.wait() == 0
