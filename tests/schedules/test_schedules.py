"""Scheduled runs through the runtime, with an injected clock, on SQLite and PostgreSQL.

Two runtimes on one store fire each tick exactly once (as two servers would); a runtime closed across
three ticks and opened again fires what its catch-up policy says; bad input writes nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime import Runtime
from runtime.errors import InvalidInputError, NotFoundError
from runtime.schedules.cron import next_tick
from runtime.store import StoreURL

pytestmark = pytest.mark.anyio

HOUR = 3600.0
T0 = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC).timestamp()  # 30 s past a whole hour


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


@asynccontextmanager
async def opened(home: Path, url: StoreURL, clock: Clock) -> AsyncIterator[Runtime]:
    async with Runtime.open(home, store=url, workers=0) as rt:
        rt.ticker.clock = clock
        yield rt


async def scheduled_runs(rt: Runtime, schedule_id: str) -> list[str]:
    runs, _ = await rt.runs.list(limit=500)
    return sorted(r.id for r in runs if r.schedule_id == schedule_id)


async def test_two_runtimes_fire_each_tick_once(tmp_path: Path, store_url: StoreURL) -> None:
    clock = Clock(T0)
    async with opened(tmp_path / "a", store_url, clock) as a, opened(tmp_path / "b", store_url, clock) as b:
        made = await a.schedules.create("echo", "0 * * * *", input={"message": "hi"}, message="hello")
        assert made["next_at"] == T0 - 30 + HOUR
        for hour in range(1, 4):
            clock.at = T0 + hour * HOUR
            async with anyio.create_task_group() as tg:  # each server's loop may be firing too
                for rt in (a, b, a, b):
                    tg.start_soon(rt.ticker.fire_due)
            assert len(await scheduled_runs(b, made["schedule_id"])) == hour
        ids = await scheduled_runs(a, made["schedule_id"])
        assert len(ids) == 3
        run = await a.runs.get(ids[0])
        assert run.schedule_id == made["schedule_id"] and run.input == {"message": "hi"} and run.session_id is not None
        listed = await b.schedules.list()
        assert listed[0]["last_tick"] == T0 - 30 + 3 * HOUR


@pytest.mark.parametrize(("policy", "expected"), [("all", 3), ("latest", 1), ("none", 0)])
async def test_restart_across_three_ticks(tmp_path: Path, store_url: StoreURL, policy: str, expected: int) -> None:
    clock = Clock(T0)
    async with opened(tmp_path, store_url, clock) as rt:
        made = await rt.schedules.create("echo", "0 * * * *", catch_up=policy)
    clock.at = T0 + 3 * HOUR + 600  # down across three ticks, back ten minutes after the third
    async with opened(tmp_path, store_url, clock) as rt:
        await rt.ticker.fire_due()
        assert len(await scheduled_runs(rt, made["schedule_id"])) == expected
        assert await rt.ticker.fire_due() == []  # nothing fires twice
        (listed,) = await rt.schedules.list()
        assert listed["next_at"] == T0 - 30 + 4 * HOUR


async def test_pause_resume_and_delete(tmp_path: Path, store_url: StoreURL) -> None:
    clock = Clock(T0)
    async with opened(tmp_path, store_url, clock) as rt:
        made = await rt.schedules.create("echo", "*/10 * * * *", name="ten")
        sid = made["schedule_id"]
        await rt.schedules.update(sid, paused=True)
        clock.at = T0 + HOUR
        assert await rt.ticker.fire_due() == []
        resumed = await rt.schedules.update(sid, paused=False, cron="30 * * * *")
        assert resumed["next_at"] == next_tick("30 * * * *", "UTC", clock.at) and not resumed["paused"]
        await rt.schedules.delete(sid)
        assert await rt.schedules.list() == []
        with pytest.raises(NotFoundError, match=sid):
            await rt.schedules.delete(sid)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ({"workflow": "echo", "cron": "61 * * * *"}, "cron"),
        ({"workflow": "echo", "cron": "* * * * * *"}, "cron"),
        ({"workflow": "echo", "cron": "0 * * * *", "timezone": "Mars/Olympus"}, "Mars/Olympus"),
        ({"workflow": "nope", "cron": "0 * * * *"}, "nope"),
        ({"workflow": "echo", "cron": "0 * * * *", "catch_up": "some"}, "catch_up"),
        ({"workflow": "echo", "cron": "0 * * * *", "input": {"message": 5}}, "input of echo"),
    ],
)
async def test_bad_input_writes_nothing(tmp_path: Path, args: dict[str, Any], named: str) -> None:
    async with Runtime.open(tmp_path, workers=0) as rt:
        with pytest.raises(Exception, match=named) as caught:
            await rt.schedules.create(**args)
        assert isinstance(caught.value, (InvalidInputError, NotFoundError))
        assert await rt.schedules.list() == []


async def test_other_scopes_do_not_see_a_schedule(tmp_path: Path) -> None:
    async with Runtime.open(tmp_path, workers=0) as rt:
        await rt.schedules.create("echo", "0 * * * *")
        with rt.scope("acme", "web"):
            assert await rt.schedules.list() == []
