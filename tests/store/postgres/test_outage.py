"""A worker cut off from PostgreSQL while it holds a run (through tests/store/postgres/proxy.py, on the
machine's server): fencing decides what it may do once it is back.

A step's commit whose answer was lost with the server, the server not answering the question of
its outcome in time: the worker cannot know whether it happened, so it hands the run back once the
server answers (its release fenced by its token), and the run's next claim goes on from what the
store holds; the commit is not made a second time.

The worker's step ends while it cannot reach the server; meanwhile its lease runs out and another
worker, which can, takes the run over and finishes it (the first step's effect replayed from the
ledger, not done again). When the first worker reaches the server again, its waiting commit is
refused by the fencing token: the run stops on it, quietly (a lost lease, not a crash), and every
effect happened once.

A read-only step's commit held for the next step (``held.py``), whose flush finds the server away:
the step is held again, not dropped, and committed once the server answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime import Runtime, StepContext, Workflow, step
from runtime.store import parse_store_url
from runtime.store.postgres import backend as postgres
from runtime.store.postgres.backend import PostgresBackend
from tests.store.postgres.outage_flow import Paying, hearing
from tests.store.postgres.proxy import Proxy

pytestmark = pytest.mark.anyio


@pytest.fixture
async def migrated(pg_url: str) -> str:
    await postgres.migrate(parse_store_url(pg_url))
    return pg_url


async def test_a_run_taken_over_while_its_worker_was_cut_off_stops_on_that_worker_once_it_is_back(
    proxy: Proxy, migrated: str, tmp_path: Path
) -> None:
    cut_off, other = Paying(), Paying()
    other.release.set()
    # A short lease for the worker cut off, so the other takes the run over once it runs out (the reaper's
    # doing, not a race: nobody can renew it meanwhile); a long one for the other, which keeps it.
    async with Runtime.open(tmp_path / "a", store=proxy.in_front_of(migrated), workers=1, lease_s=1.5) as a:
        a.workflows.register(cut_off)
        run = await a.runs.start("paying")
        waiting, lost = f"run {run.id}'s commit waits for the store", f"lease on run {run.id} lost"
        with hearing(waiting, lost, "crashed the runner") as heard:
            with anyio.fail_after(30):
                await cut_off.holding.wait()
            await proxy.refuse()
            cut_off.release.set()  # its step ends; the commit waits for the server
            with anyio.fail_after(30):
                await heard.any.wait()
            assert heard[waiting].is_set(), "the commit did not wait for the server"
            async with Runtime.open(tmp_path / "b", store=migrated, workers=1, lease_s=120) as b:
                b.workflows.register(other)
                done = await b.runs.wait(run.id, 30)
                assert done.status == "succeeded", done.error
                await proxy.accept()
                with anyio.fail_after(30):
                    await heard[lost].wait()  # refused by fencing, once the server answered it
                events = [e.type for e in await b.runs.events(run.id, 0, 1000)]
                ledger = await b.runs.effects(None, run.id)
            assert not heard["crashed the runner"].is_set()
    assert cut_off.applied == [(run.id, "paid")]  # the first step's effect, before the cut
    assert other.applied == [(run.id, "shipped")]  # its replay of "pay" came from the ledger
    assert sorted((e.key, e.status) for e in ledger) == [("pay", "succeeded"), ("ship", "succeeded")]
    assert events.count("step.completed") == 2 and events.count("effect.succeeded") == 2


async def test_a_commit_whose_answer_was_lost_with_the_server_is_not_made_twice_and_the_run_goes_on(
    proxy: Proxy, migrated: str, tmp_path: Path
) -> None:
    flow = Paying()
    async with Runtime.open(tmp_path, store=proxy.in_front_of(migrated), workers=1, lease_s=120) as rt:
        assert isinstance(rt.store, PostgresBackend)
        rt.store.db.resolve_window = 0.2  # the server stays away longer than the commit's outcome is asked for
        rt.workflows.register(flow)
        run = await rt.runs.start("paying")
        unknown = f"run {run.id} handed back"
        with hearing(unknown, "crashed the runner") as heard:
            with anyio.fail_after(30):
                await flow.holding.wait()
            # The step's commit reaches the server and is committed; its answer is lost, and the server
            # cannot be reached to ask: the worker cannot know whether the step's commit happened.
            proxy.mode, proxy.refuse_after_cut = "cut_after_commit", True
            flow.release.set()
            with anyio.fail_after(30):
                await heard.any.wait()
            assert heard[unknown].is_set() and proxy.cuts == 1
            await proxy.accept()
            # Well inside the 120 s lease: the run was handed back, not left to its lease running out.
            with anyio.fail_after(20):
                await flow.second.wait()
                done = await rt.runs.wait(run.id, 20)
        assert not heard["crashed the runner"].is_set()
        assert done.status == "succeeded", done.error
        events = [(e.type, e.data.get("step")) for e in await rt.runs.events(run.id, 0, 1000)]
        assert events.count(("step.completed", "pay")) == 1  # committed once, not again after the hand-back
        ledger = await rt.runs.effects(None, run.id)
        assert sorted((e.key, e.status) for e in ledger) == [("pay", "succeeded"), ("ship", "succeeded")]
    assert flow.applied == [(run.id, "paid"), (run.id, "shipped")]


class Reading(Workflow):
    """Three read-only steps: the first one's commit is held for the next (``held.py``), which waits."""

    name = "reading"

    def __init__(self) -> None:
        self.first, self.second = anyio.Event(), anyio.Event()
        self.in_first, self.in_second = anyio.Event(), anyio.Event()

    @step(entry=True, effects="read_only", successors=["b"])
    async def a(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        self.in_first.set()
        await self.first.wait()
        return {**state, "a": 1}

    @step(effects="read_only", successors=["c"])
    async def b(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        self.in_second.set()
        await self.second.wait()  # while it waits, a flush commits the step held before it
        return {**state, "b": 2}

    @step(effects="read_only")
    async def c(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "c": 3}


async def test_a_held_step_whose_flush_finds_the_server_away_is_held_again_and_committed_once_it_is_back(
    proxy: Proxy, migrated: str, tmp_path: Path
) -> None:
    flow = Reading()
    async with Runtime.open(tmp_path, store=proxy.in_front_of(migrated), workers=1, lease_s=120) as rt:
        rt.workflows.register(flow)
        run = await rt.runs.start("reading")
        waiting, back = f"run {run.id}'s commit waits for the store", f"run {run.id}'s commit went on"
        with hearing(waiting, back, "crashed the runner") as heard:
            with anyio.fail_after(30):
                await flow.in_first.wait()
            await proxy.refuse()
            flow.first.set()  # step a ends, its commit held; b starts and waits, so the held commit is flushed
            with anyio.fail_after(30):
                await flow.in_second.wait()
                await heard.any.wait()
            assert heard[waiting].is_set()
            await proxy.accept()
            with anyio.fail_after(30):
                await heard[back].wait()  # a's commit made, while b still waits
            flow.second.set()
            done = await rt.runs.wait(run.id, 30)
        assert not heard["crashed the runner"].is_set()
        assert done.status == "succeeded", done.error
        completed = [e.data["step"] for e in await rt.runs.events(run.id, 0, 1000) if e.type == "step.completed"]
        assert completed == ["a", "b", "c"]
        assert done.state == {"a": 1, "b": 2, "c": 3}
