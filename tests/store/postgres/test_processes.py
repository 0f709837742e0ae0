"""Several processes on one PostgreSQL database, as they run in production: two ``rath-mcp serve
--transport http --workers 0`` servers and ``rath-mcp worker`` processes, driven by the real MCP SDK
client over Streamable HTTP.

Every process polls once an hour (``RATH_POLL_S=3600``) and leases last an hour where a renewal
could tell a worker of a cancel, so within a test's 50-second waits only a LISTEN/NOTIFY
notification can explain a process noticing what another one did: no test here measures time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from mcp import Client

from tests.mcp.conftest import call
from tests.store.postgres.barrier import Barrier
from tests.transports._servers import RunningServer, http_server

pytestmark = pytest.mark.anyio
FLOWS = "tests.store.postgres.process_flows"
WAIT_S = 50  # run_wait's longest budget: far below the hour-long polls


@asynccontextmanager
async def worker(store: str, home: Path, *extra: str) -> AsyncIterator[Process]:
    """A ``rath-mcp worker`` process on ``store`` for the life of the block (its stderr in a file)."""
    command = [sys.executable, "-m", "rath_mcp", "worker", "--store", store, "--home", str(home)]
    command += ["--workflows", FLOWS, *extra]
    with home.with_name(f"{home.name}.log").open("wb") as err:
        process = await anyio.open_process(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        try:
            yield process
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                await process.wait()


@asynccontextmanager
async def servers(store: str, tmp_path: Path) -> AsyncIterator[tuple[Client, Client]]:
    """Two MCP-only servers on ``store`` and a Streamable HTTP client of each."""
    extra = ("--workers", "0", "--store", store, "--workflows", FLOWS)
    async with (
        http_server("http", tmp_path / "one", *extra) as one,
        http_server("http", tmp_path / "two", *extra) as two,
        client(one) as first,
        client(two) as second,
    ):
        yield first, second


def client(server: RunningServer) -> Client:
    return Client(f"{server.base}/mcp", mode="legacy")


async def state_of(client: Client, run_id: str) -> dict[str, Any]:
    body = (await client.read_resource(f"rath://runs/{run_id}")).contents[0]
    state: dict[str, Any] = json.loads(getattr(body, "text", "{}"))["state"]
    return state


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_an_interrupt_answered_on_one_server_wakes_the_wait_on_the_other(store: str, tmp_path: Path) -> None:
    async with servers(store, tmp_path) as (first, second), worker(store, tmp_path / "w") as driving:
        started = await call(first, "run_start", workflow="approval", input={"draft": "to approve"}, wait_s=0)
        run_id = started["run_id"]
        parked = await call(first, "run_wait", run_id=run_id, timeout_s=WAIT_S)  # the worker's park, by NOTIFY
        assert parked["status"] == "waiting", parked
        (asked,) = parked["pending_interrupts"]

        driving.send_signal(signal.SIGSTOP)  # the run cannot move on before server 1's wait is pending
        answered = await call(second, "interrupt_resolve", interrupt_id=asked["interrupt_id"], action="approve")
        assert answered["status"] == "queued"
        waiting, outcome = anyio.Event(), {}

        async def pending(_progress: float, _total: float | None, _message: str | None) -> None:
            waiting.set()  # the first progress of run_wait: it read the run and waits on it

        async def wait_on_first() -> None:
            args = {"run_id": run_id, "timeout_s": WAIT_S}
            result = await first.call_tool("run_wait", args, progress_callback=pending)
            outcome.update(result.structured_content or {})

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_on_first)
            await waiting.wait()
            driving.send_signal(signal.SIGCONT)  # it hears server 2's answer (NOTIFY), finishes, NOTIFYs
        assert outcome["status"] == "succeeded", outcome
        assert (await state_of(second, run_id))["outcome"] == "approved"


async def test_a_worker_killed_mid_step_is_taken_over_and_its_effect_applied_once(store: str, tmp_path: Path) -> None:
    ledger, barrier = tmp_path / "ledger", Barrier(tmp_path / "barrier.sock", WAIT_S)
    async with (
        servers(store, tmp_path) as (first, _second),
        worker(store, tmp_path / "w1", "--workers", "1", "--lease-s", "1.5") as w1,
        worker(store, tmp_path / "w2", "--workers", "1", "--lease-s", "1.5") as w2,
        anyio.create_task_group() as tg,
    ):
        await tg.start(barrier.serve)
        run_input = {"ledger": str(ledger), "socket": str(barrier.path)}
        run = await call(first, "run_start", workflow="barrier", input=run_input, wait_s=0)
        (pid,), _held = await barrier.next()  # the effect is recorded and applied; the step holds here
        assert _lines(ledger) == [run["run_id"]]
        killed, survivor = (w1, w2) if int(pid) == w1.pid else (w2, w1)
        assert int(pid) == killed.pid
        killed.send_signal(signal.SIGKILL)
        await killed.wait()

        (pid,), again = await barrier.next()  # the lease expired; the other worker re-runs the step
        assert int(pid) == survivor.pid
        await again.send(b"go\n")
        done = await call(first, "run_wait", run_id=run["run_id"], timeout_s=WAIT_S)
        assert done["status"] == "succeeded", done
        assert (await state_of(first, run["run_id"]))["answer"] == "go"
        tg.cancel_scope.cancel()
    assert _lines(ledger) == [run["run_id"]]  # replayed from the ledger, not applied again


async def test_a_cancel_on_one_server_reaches_the_worker_in_another_process_by_notify(
    store: str, tmp_path: Path
) -> None:
    barrier = Barrier(tmp_path / "barrier.sock", WAIT_S)
    async with (
        servers(store, tmp_path) as (first, second),
        worker(store, tmp_path / "w", "--lease-s", "3600") as _driving,  # no renewal can carry the cancel
        anyio.create_task_group() as tg,
    ):
        await tg.start(barrier.serve)
        run_input = {"ledger": str(tmp_path / "ledger"), "socket": str(barrier.path)}
        run = await call(first, "run_start", workflow="barrier", input=run_input, wait_s=0)
        await barrier.next()  # the step is running, held at the barrier
        await call(second, "run_cancel", run_id=run["run_id"], reason="from server two")
        done = await call(first, "run_wait", run_id=run["run_id"], timeout_s=WAIT_S)
        assert done["status"] == "cancelled", done
        assert "from server two" in (done["error"] or "")
        tg.cancel_scope.cancel()
