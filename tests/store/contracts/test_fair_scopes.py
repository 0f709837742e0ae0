"""The fair queue's list of scopes with queued runs (``run_scopes``) stays true on every path that makes a
run queued or not, on every backend: the fair order is checked after each.

Each test drains scope B (its only run claimed, parked, cancelled...), lets the reaper tidy the list
(``claims.sweep`` drops B: nothing of it is queued), then makes a run of B queued again by one path; A
has runs running and more queued, all older than B's. The fair claim must take B's run: a list that
missed B would hand out A's next run instead.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from runtime.backend import StoreBackend
from runtime.durable.store import RELEASE, Holder, NewInterrupt, RunQueue, RunStore, StepCommit
from runtime.flow.workflow import Decision
from runtime.ids import new_id
from tests.store.contracts.conftest import open_again
from tests.store.contracts.test_run_store import new_run, started

pytestmark = pytest.mark.anyio


async def tidy(queue: RunQueue) -> None:
    """The store-wide reaper sees a scope listed with nothing queued, and sweeps the list."""
    assert await queue.needs_reaping()
    await queue.reap()
    assert not await queue.needs_reaping()


async def busy_a(backend: StoreBackend) -> tuple[RunQueue, RunStore, RunStore, list[str]]:
    """A with 2 runs running and 3 queued; B with one run, created after all of A's, claimed: B is drained."""
    queue, a, b = backend.queue(), backend.runs("alpha", "p"), backend.runs("bravo", "p")
    backlog = [await started(a) for _ in range(5)]
    assert [c.id for c in await queue.claim("w", 30.0, 2, ["wf"])] == backlog[:2]
    return queue, a, b, backlog[2:]


async def b_comes_first(queue: RunQueue, run_id: str) -> None:
    assert [c.id for c in await queue.claim("w", 30.0, 1, ["wf"])] == [run_id]  # B runs none, A two


async def drained(queue: RunQueue, b: RunStore) -> tuple[str, int]:
    """B's one run, created and claimed through the queue (B has the fewest running); then a tidy."""
    run_id = await started(b)
    (claim,) = await queue.claim("w", 30.0, 1, ["wf"])
    assert claim.id == run_id
    await tidy(queue)
    return run_id, claim.token


async def test_a_run_created_in_a_drained_scope_is_served_first(backend: StoreBackend) -> None:
    queue, _, b, _ = await busy_a(backend)
    await drained(queue, b)
    await b_comes_first(queue, await started(b))


async def test_a_run_requeued_by_the_reaper_is_served_first(backend: StoreBackend) -> None:
    queue, _, b, _ = await busy_a(backend)
    run_id, token = await drained(queue, b)
    await queue.release([(run_id, token)])  # its lease given up: the reaper hands it on at once
    assert await queue.reap() == [run_id]
    await b_comes_first(queue, run_id)


async def test_a_run_handed_on_by_takeover_is_served_first(backend: StoreBackend) -> None:
    queue, _, b, _ = await busy_a(backend)
    run_id = await started(b)
    (claim,) = await queue.claim("gone", 3600.0, 1, ["wf"], holder=Holder("host-x", 7, 1))
    assert claim.id == run_id
    await tidy(queue)
    assert await queue.take_over("host-x", 7, 1) == [run_id]
    await b_comes_first(queue, run_id)


async def test_a_run_queued_by_a_decision_is_served_first(backend: StoreBackend) -> None:
    queue, _, b, _ = await busy_a(backend)
    run_id, token = await drained(queue, b)
    ask = NewInterrupt(new_id("int"), "first", 1, 0, "approval", "ok?", None, None)
    await b.park(run_id, token, ask, "{}")
    await b.decide(ask.id, Decision(action="approve", actor="me"), lambda i: None)
    await b_comes_first(queue, run_id)


async def test_a_retry_ready_at_once_is_served_first(backend: StoreBackend) -> None:
    queue, _, b, _ = await busy_a(backend)
    run_id, token = await drained(queue, b)
    change = {**RELEASE, "status": "queued", "attempt": 2}
    await b.commit(StepCommit(run_id, token, change, [("step.failed", {})], retry_in_s=0.0))
    await b_comes_first(queue, run_id)


async def test_a_fork_and_a_cancel_keep_the_order(backend: StoreBackend) -> None:
    queue, _, b, backlog = await busy_a(backend)
    cancelled = await started(b)
    await b.cancel(cancelled, "not wanted")  # B's only queued run gone: A's next, though B runs none
    assert [c.id for c in await queue.claim("w", 30.0, 1, ["wf"])] == [backlog[0]]
    await tidy(queue)
    fork = await b.create(new_run(forked_from=(cancelled, 1)), [("run.created", {})])
    await b_comes_first(queue, fork)


async def test_runs_queued_while_the_list_is_swept_are_all_claimed(backend: StoreBackend) -> None:
    """Creators, claimers and reapers at once (backends on one store stand in for processes): the claimers
    empty the scopes over and over, and the reapers sweep the list meanwhile; a scope made queued while a
    sweep looks at it is never dropped, so every run is claimed through the queue."""
    others = [await open_again(backend), await open_again(backend)]
    made: list[str] = []
    taken: list[str] = []
    creating = 2
    try:

        async def create(each: StoreBackend, tenant: str) -> None:
            nonlocal creating
            for _ in range(20):
                made.append(await started(each.runs(tenant, "p")))
                await anyio.lowlevel.checkpoint()
            creating -= 1

        async def claim(each: StoreBackend) -> None:
            while creating:
                taken.extend(c.id for c in await each.queue().claim("w", 30.0, 2, ["wf"]))
                await anyio.lowlevel.checkpoint()

        async def sweep(each: StoreBackend) -> None:
            while creating:
                await each.queue().reap()
                await anyio.lowlevel.checkpoint()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sweep, others[1])
                tg.start_soon(sweep, backend)
                tg.start_soon(create, backend, "t1")
                tg.start_soon(create, others[0], "t2")
                tg.start_soon(claim, others[1])
                tg.start_soon(claim, backend)
        while claims := await backend.queue().claim("w", 30.0, 10, ["wf"]):
            taken.extend(c.id for c in claims)
    finally:
        for other in others:
            await other.close()
    assert sorted(taken) == sorted(made)
