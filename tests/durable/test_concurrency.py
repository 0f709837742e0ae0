"""Workflow concurrency: at most N runs at once across every worker and process of a store, first in first out.

Each run's step logs ``enter``, waits for a release file named after its run, and logs ``exit``.
The step's interval lies inside the run's claim (entered after its claim committed, left before its
completion commits), so if the store ever let more than N runs run at once, the log would show more
than N between an ``enter`` and an ``exit``, and the test, which releases one run at a time, would
see it. No timing: the test waits for the log to show the runs it expects and then lets one go.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime import Runtime
from runtime.durable import Worker
from tests.durable.conftest import FLOWS, eventually
from tests.durable.flows import lines
from tests.durable.test_processes import process, readline

pytestmark = pytest.mark.anyio


def in_flight(log: Path) -> list[str]:
    """Runs entered and not yet left, in the order they entered."""
    running: list[str] = []
    for line in lines(log):
        kind, run_id = line.split()
        running.append(run_id) if kind == "enter" else running.remove(run_id)
    return running


def most_at_once(log: Path) -> int:
    most, now = 0, 0
    for line in lines(log):
        now += 1 if line.startswith("enter") else -1
        most = max(most, now)
    return most


def first_per_user(pending: list[str], users: dict[str, str]) -> list[str]:
    seen: dict[str, str] = {}
    for run_id in pending:
        seen.setdefault(users[run_id], run_id)
    return list(seen.values())


async def release_one_by_one(
    log: Path, release: Path, ids: list[str], expect: Callable[[list[str]], list[str]]
) -> None:
    """Until every run is done: wait until the runs ``expect(pending)`` are the ones running, let the oldest go."""
    pending = list(ids)
    while pending:
        want = expect(pending)

        async def running_as_expected(want: list[str] = want) -> list[str] | None:
            running = in_flight(log)
            return running if len(running) >= len(want) else None

        running = await eventually(running_as_expected, timeout=60)
        assert sorted(running) == sorted(want), "the oldest queued runs (per group) are the ones running"
        oldest = pending.pop(0)
        (release / oldest).touch()

        async def left(oldest: str = oldest) -> bool:
            return f"exit {oldest}" in lines(log)

        await eventually(left, timeout=60)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    release = tmp_path / "release"
    release.mkdir()
    return tmp_path / "log", release


@pytest.fixture(params=["processes", "one process"])
def workers(request: pytest.FixtureRequest, home: Path, store: str | None) -> Iterator[Callable[[Runtime], Any]]:
    """Three claimers of one slot each, so that runs running at once are held by different claimers:
    three worker processes, or three workers in this process; ``async with workers(rt):`` runs them."""
    with ExitStack() as stack:

        @asynccontextmanager
        async def serve(rt: Runtime) -> AsyncIterator[None]:
            if request.param == "processes":
                argv = ("worker", str(home), "30", store or "-", "1")
                started = [stack.enter_context(process(*argv)) for _ in range(3)]
                for proc in started:
                    assert await readline(proc, timeout=60) == "ready"
                yield
                return
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(Worker(rt.engine, slots=1).run)
                yield
                tg.cancel_scope.cancel()

        yield serve


async def claimers(rt: Runtime, ids: list[str]) -> set[str]:
    """The workers that claimed these runs (``host:pid:…``)."""
    return {e.data["worker"] for i in ids for e in await rt.runs.events(i) if e.data.get("status") == "running"}


async def test_a_limit_holds_across_workers_and_processes_and_runs_start_first_in_first_out(
    home: Path, store: str | None, files: tuple[Path, Path], workers: Callable[[Runtime], Any]
) -> None:
    log, release = files
    async with Runtime.open(home, store=store, workers=0) as rt, workers(rt):
        rt.workflows.load(FLOWS)
        assert rt.workflows.get("limited").concurrency == 2
        ids = [(await rt.runs.start("limited", input={"log": str(log), "release": str(release)})).id for _ in range(7)]
        await release_one_by_one(log, release, ids, lambda pending: pending[:2])
        done = [await rt.runs.wait(run_id, 30) for run_id in ids]
        took_part = await claimers(rt, ids)
    assert [run.status for run in done] == ["succeeded"] * 7
    assert most_at_once(log) == 2  # reached, never passed
    assert len(took_part) >= 2  # follows from most_at_once == 2, as each claimer has one slot


async def test_a_concurrency_key_runs_one_run_per_user_at_a_time(
    home: Path, store: str | None, files: tuple[Path, Path], workers: Callable[[Runtime], Any]
) -> None:
    log, release = files
    async with Runtime.open(home, store=store, workers=0) as rt, workers(rt):
        rt.workflows.load(FLOWS)
        users: dict[str, str] = {}
        for user in ["ann", "bob", "ann", "ann", "bob", "cy"]:
            run = await rt.runs.start("per_user", input={"log": str(log), "release": str(release), "user": user})
            users[run.id] = user
        ids = list(users)
        await release_one_by_one(log, release, ids, lambda pending: first_per_user(pending, users))
        done = [await rt.runs.wait(run_id, 30) for run_id in ids]
    assert [run.status for run in done] == ["succeeded"] * 6
    assert most_at_once(log) == 3  # ann, bob and cy at once; never two of one user (checked at every stage)


async def test_a_run_waiting_on_an_interrupt_does_not_hold_its_slot(drt: Runtime) -> None:
    first = await drt.runs.wait((await drt.runs.start("one_asking")).id, 20)
    second = await drt.runs.wait((await drt.runs.start("one_asking")).id, 20)  # runs although the first waits
    assert (first.status, second.status) == ("waiting", "waiting")
    for run in (second, first):
        await drt.runs.resolve_interrupt(run.pending_interrupts[0].id, "approve")
    assert [(await drt.runs.wait(r.id, 20)).state["decided"] for r in (first, second)] == ["approve", "approve"]


async def test_a_bad_limit_or_key_is_refused_when_the_workflow_is_registered_or_started(drt: Runtime) -> None:
    from runtime import EffectClass, StepContext, Workflow, step
    from runtime.errors import InvalidInputError

    class Zero(Workflow):
        concurrency = 0

        @step(entry=True, effects=EffectClass.NONE)
        async def go(self, state: dict[str, object], ctx: StepContext) -> dict[str, object]:
            return state

    with pytest.raises(InvalidInputError, match="concurrency = 0; give a whole number"):
        drt.workflows.register(Zero)

    class Keyed(Workflow):
        concurrency = 2

        def concurrency_key(self, input: dict[str, object]) -> str | None:
            return str(input["team"]).lower()

        @step(entry=True, effects=EffectClass.NONE)
        async def go(self, state: dict[str, object], ctx: StepContext) -> dict[str, object]:
            return state

    plan = drt.workflows.register(Keyed)
    assert (plan.concurrency, plan.run_key({"team": "Red"})) == (2, "red")
    assert plan.describe()["concurrency"] == 2 and plan.describe()["concurrency_key"] == "concurrency_key()"
    before = await drt.runs.list()
    with pytest.raises(InvalidInputError, match="concurrency_key of workflow 'keyed' failed on this input"):
        await drt.runs.start("keyed", input={"colour": "red"})
    assert await drt.runs.list() == before  # nothing written
    assert (await drt.runs.wait((await drt.runs.start("keyed", input={"team": "x"})).id, 20)).status == "succeeded"
