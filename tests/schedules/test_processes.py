"""Schedules fired by separate OS processes on one store, and the worker a tick's run wakes.

Two firer processes (``tests/schedules/firer.py``: the runtime as ``serve`` opens it, its ticker on a
clock the test sets) on PostgreSQL and on one SQLite home are told the same tick at once: each tick
makes exactly one run. A firer SIGKILLed after one tick and a new one started after three more fire
what each catch-up policy says (3, 1, 0). On PostgreSQL a tick's run is announced like a started one, so a worker in
another process, polling only every 600 s, claims it as soon as it is made.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from runtime.store import StoreURL
from tests.cli.serving import WAIT_S, clean_env, rath_argv, running
from tests.schedules.test_schedules import HOUR, T0, Clock, opened, scheduled_runs

pytestmark = pytest.mark.anyio


class Firer:
    def __init__(self, process: Process, errors: Path) -> None:
        self.process = process
        self.errors = errors  # its stderr, written to a file (never a pipe nobody reads, which could fill)
        assert process.stdout is not None
        self.out = BufferedByteReceiveStream(process.stdout)

    async def line(self) -> str:
        """Its next line; if it ends or stays silent instead, the test fails with what it wrote on stderr
        (a firer that could not open its store says why there, and only there)."""
        try:
            with anyio.fail_after(WAIT_S):
                return (await self.out.receive_until(b"\n", 1 << 20)).decode()
        except (anyio.EndOfStream, anyio.IncompleteRead, TimeoutError) as exc:
            said = self.errors.read_text(errors="replace")[-4000:]
            raise AssertionError(f"the firer gave no line ({type(exc).__name__}); its stderr:\n{said}") from exc

    async def fire(self, at: float) -> list[str]:
        assert self.process.stdin is not None
        await self.process.stdin.send(f"{at}\n".encode())
        made: list[str] = json.loads(await self.line())
        return made


@asynccontextmanager
async def firer(home: Path, url: StoreURL) -> AsyncIterator[Firer]:
    argv = [sys.executable, "-m", "tests.schedules.firer", str(home), url.url]
    errors = home.parent / f"firer-{time.monotonic_ns()}.stderr"
    with errors.open("wb") as stderr:
        process = await anyio.open_process(argv, stderr=stderr, env=clean_env())
    try:
        found = Firer(process, errors)
        assert await found.line() == "ready"
        yield found
    finally:
        with anyio.CancelScope(shield=True):
            if process.stdin is not None:
                await process.stdin.aclose()  # its end of input: it closes its runtime and exits
            with anyio.move_on_after(WAIT_S):
                await process.wait()
            if process.returncode is None:
                process.kill()
            await process.aclose()


async def test_two_firer_processes_on_one_store_make_one_run_per_tick(tmp_path: Path, store_url: StoreURL) -> None:
    home = tmp_path / "home"  # one home for both processes: on SQLite, one database file
    async with opened(home, store_url, Clock(T0)) as rt:
        made = await rt.schedules.create("echo", "0 * * * *", catch_up="all")
    async with firer(home, store_url) as a, firer(home, store_url) as b:
        for hour in range(1, 4):
            at = T0 + hour * HOUR
            fired: list[list[str]] = [[], []]

            async def fire(i: int, each: Firer, at: float = at, fired: list[list[str]] = fired) -> None:
                fired[i] = await each.fire(at)

            async with anyio.create_task_group() as tg:  # both told the tick at once
                tg.start_soon(fire, 0, a)
                tg.start_soon(fire, 1, b)
            assert len(fired[0]) + len(fired[1]) <= 1  # a process's own ticker loop may have fired it first
    async with opened(home, store_url, Clock(T0 + 3 * HOUR)) as rt:
        ids = await scheduled_runs(rt, made["schedule_id"])
        assert len(ids) == 3  # one per tick: none missed, none twice
        (listed,) = await rt.schedules.list()
        assert listed["last_tick"] == T0 - 30 + 3 * HOUR


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_a_ticks_run_wakes_a_worker_process_at_once_on_postgresql(tmp_path: Path, store_url: StoreURL) -> None:
    """The worker polls every 600 s; the run must finish well before that, so only a notification can wake it.
    The worker's own ticker reads the real clock: the schedule's tick (a leap day's midnight) is not due
    there, so the worker cannot fire (and wake itself) but only hear of the run this test's ticker makes."""
    argv = rath_argv("worker", "--home", str(tmp_path / "worker"), "--store", store_url.url, "--workers", "1")
    async with running(argv, env={"RATH_POLL_S": "600"}) as worker:
        await worker.line_with(r"^rath-mcp: worker on the store ")
        clock = Clock(time.time())
        async with opened(tmp_path / "server", store_url, clock) as rt:
            made = await rt.schedules.create("echo", "0 0 29 2 *", input={"message": "tick"})
            assert made["next_at"] > time.time() + HOUR  # not due on the worker's clock during this test
            clock.at = made["next_at"]
            await rt.ticker.fire_due()  # or its own loop, on the same clock, fired it first
            (run_id,) = await scheduled_runs(rt, made["schedule_id"])
            run = await rt.runs.wait(run_id, WAIT_S / 2)  # heard on the store's notifications, or its poll
            assert run.status == "succeeded", (run.status, worker.lines)
            assert await scheduled_runs(rt, made["schedule_id"]) == [run_id]  # the worker fired nothing


@pytest.mark.parametrize(("policy", "expected"), [("all", 3), ("latest", 1), ("none", 0)])
async def test_a_firer_killed_and_restarted_across_three_ticks_catches_up_by_its_policy(
    tmp_path: Path, store_url: StoreURL, policy: str, expected: int
) -> None:
    home = tmp_path / "home"
    async with opened(home, store_url, Clock(T0)) as rt:
        made = await rt.schedules.create("echo", "0 * * * *", catch_up=policy)
    async with firer(home, store_url) as first:
        await first.fire(T0 + HOUR)  # one tick fired (here, or by its own loop first)
        first.process.kill()  # SIGKILL: nothing closed cleanly
        await first.process.wait()
    async with firer(home, store_url) as second:  # back ten minutes after the fourth tick
        await second.fire(T0 + 4 * HOUR + 600)
    async with opened(home, store_url, Clock(T0 + 4 * HOUR + 600)) as rt:
        assert len(await scheduled_runs(rt, made["schedule_id"])) == 1 + expected
        (listed,) = await rt.schedules.list()
        assert listed["next_at"] == T0 - 30 + 5 * HOUR
