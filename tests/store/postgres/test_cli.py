"""``rath-mcp`` on a PostgreSQL store, as real subprocesses against the real server: ``migrate
[--check]`` applies and reports the schema; ``serve`` and ``worker`` never run DDL, and with
migrations pending they exit 2 with one line naming the migrate command; once migrated, a worker
process drives a run another process started, and the starter hears of it by NOTIFY."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import asyncpg
import pytest

from runtime import Runtime

pytestmark = pytest.mark.anyio


async def rath(*args: str, home: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("RATH_STORE", None)
    command = [sys.executable, "-m", "rath_mcp", *args, "--home", str(home)]
    return await anyio.run_process(command, check=False, env=env)


async def tables(pg_url: str) -> int:
    conn = await asyncpg.connect(pg_url)
    try:
        return int(await conn.fetchval("SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()"))
    finally:
        await conn.close()


async def test_serve_and_worker_refuse_a_store_with_migrations_pending_and_run_no_ddl(
    pg_url: str, tmp_path: Path
) -> None:
    for command in (["serve", "--workers", "0"], ["worker"]):
        done = await rath(*command, "--store", pg_url, home=tmp_path)
        lines = done.stderr.decode().strip().splitlines()
        assert done.returncode == 2, done.stderr.decode()
        assert len(lines) == 1 and "migration(s) pending" in lines[0] and "rath-mcp migrate --store" in lines[0]
    assert await tables(pg_url) == 0  # nothing was created, not even the migrations table


async def test_migrate_check_reports_then_migrate_applies_then_nothing_is_pending(pg_url: str, tmp_path: Path) -> None:
    check = await rath("migrate", "--check", "--store", pg_url, home=tmp_path)
    assert check.returncode == 1 and b"pending: 0100_durable" in check.stdout, check.stderr.decode()
    applied = await rath("migrate", "--store", pg_url, home=tmp_path)
    assert applied.returncode == 0 and b"applied: 0100_durable" in applied.stdout, applied.stderr.decode()
    again = await rath("migrate", "--check", "--store", pg_url, home=tmp_path)
    assert again.returncode == 0 and b"up to date" in again.stdout
    assert await tables(pg_url) > 0


async def test_a_worker_process_drives_a_run_started_elsewhere_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    assert (await rath("migrate", "--store", pg_url, home=tmp_path)).returncode == 0
    async with Runtime.open(tmp_path / "a", store=pg_url, workers=0) as rt:
        run = await rt.runs.start("echo", input={"message": "from another process"})
        command = [sys.executable, "-m", "rath_mcp", "worker", "--store", pg_url, "--home", str(tmp_path / "b")]
        async with await anyio.open_process(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as worker:
            done = await rt.runs.wait(run.id, 60)
            assert done.status == "succeeded", done.error
            worker.send_signal(signal.SIGTERM)
            with anyio.fail_after(15):
                assert await worker.wait() == 0
