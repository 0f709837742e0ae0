"""Idempotent submit through a real MCP client: the same request repeated with its key returns the same
run (``run_start`` with a message or a session, ``delegate``), from one process or two racing on one
store (a SQLite file, and PostgreSQL); only a genuinely different request under the key is refused."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from runtime import Runtime
from runtime.store.postgres import backend as postgres
from runtime.store.url import parse_store_url
from tests import pg
from tests.mcp.conftest import call, call_error

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


async def test_a_retried_run_start_with_a_message_returns_the_same_run_and_makes_one_session(client: Client) -> None:
    args = {"workflow": "echo", "message": "same", "idempotency_key": "k"}
    first = await call(client, "run_start", **args)
    again = await call(client, "run_start", **args)
    assert again["run_id"] == first["run_id"] and again["session_id"] == first["session_id"]
    sessions = (await call(client, "session_list"))["sessions"]
    assert len([s for s in sessions if s["op"] == "create"]) == 1  # the retry made no second input session


async def test_a_retried_run_start_with_a_session_returns_the_same_run(client: Client) -> None:
    sid = (await call(client, "session_create", message="hello"))["session_id"]
    first = await call(client, "run_start", workflow="echo", session_id=sid, idempotency_key="s1", wait_s=10)
    again = await call(client, "run_start", workflow="echo", session_id=sid, idempotency_key="s1")
    assert again["run_id"] == first["run_id"] and again["status"] == "succeeded"


async def test_a_retried_delegate_returns_the_same_run(client: Client) -> None:
    first = await call(client, "delegate", task="do it once", workflow="echo", idempotency_key="d1", wait_s=10)
    again = await call(client, "delegate", task="do it once", workflow="echo", idempotency_key="d1", wait_s=10)
    assert again["run_id"] == first["run_id"] and again["answer"] == "do it once"
    assert len((await call(client, "run_list"))["runs"]) == 1


async def test_a_different_request_under_a_used_key_is_a_usage_error_naming_the_key_and_what_differs(
    client: Client,
) -> None:
    await call(client, "run_start", workflow="echo", message="same", idempotency_key="k")
    other_message = await call_error(client, "run_start", workflow="echo", message="other", idempotency_key="k")
    assert "idempotency key 'k'" in other_message and "different message" in other_message
    assert "use a new key" in other_message
    other_flow = await call_error(client, "run_start", workflow="approval", message="same", idempotency_key="k")
    assert "different workflow" in other_flow
    other_input = await call_error(
        client, "run_start", workflow="echo", message="same", input={"message": "x"}, idempotency_key="k"
    )
    assert "different input" in other_input
    longer = await call_error(client, "run_start", workflow="echo", message="same", idempotency_key="k", deadline_s=9)
    assert "different deadline_s" in longer
    assert len((await call(client, "run_list"))["runs"]) == 1  # the refused requests wrote nothing


# -- two processes racing on one store ------------------------------------------------------------
KEYS = [f"race-{i}" for i in range(12)]


def _spawn(store: str, home: Path, go: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.mcp.submit_proc", store, str(home), str(go), *KEYS],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """The racing processes a test starts, killed and reaped whatever happens."""
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)


async def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    with anyio.fail_after(60):
        line = await anyio.to_thread.run_sync(proc.stdout.readline, abandon_on_cancel=True)
    if not line:
        raise AssertionError(f"process exited {proc.wait()}: {proc.stderr.read() if proc.stderr else ''}")
    return line.strip()


async def _race(store: str, tmp_path: Path, processes: list[subprocess.Popen[str]]) -> None:
    go = tmp_path / "go"
    processes += [_spawn(store, tmp_path / f"home{i}", go) for i in range(2)]
    for proc in processes:
        assert await _line(proc) == "ready"
    go.touch()
    made = [json.loads(await _line(proc)) for proc in processes]
    assert made[0] == made[1]  # every key gave both processes the same run
    assert len(set(made[0].values())) == len(KEYS)
    async with Runtime.open(tmp_path / "reader", store=store, workers=0) as rt:
        runs, _ = await rt.runs.list(limit=100)
    assert sorted(r.id for r in runs) == sorted(made[0].values())  # one run per key, no more


async def test_two_processes_retrying_at_once_on_one_sqlite_file_get_the_same_runs(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    await _race(f"sqlite://{tmp_path / 'shared.db'}", tmp_path, processes)


@pytest.fixture
def pg_store(pg_database: str) -> str:
    """A migrated fresh schema (made outside the test's event loop)."""
    url = pg.url(pg_database, search_path=asyncio.run(pg.create_schema(pg_database)))
    asyncio.run(postgres.migrate(parse_store_url(url)))
    return url


async def test_two_processes_retrying_at_once_on_postgresql_get_the_same_runs(
    tmp_path: Path, pg_store: str, processes: list[subprocess.Popen[str]]
) -> None:
    await _race(pg_store, tmp_path, processes)
