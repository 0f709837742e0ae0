"""The ``RunStore`` contract of claims, run on every backend: holders and takeover, concurrency limits.

Holders here are made-up processes (a host string, a pid, a start time): the store only records
and matches them; whether a process has ended is the worker's question (``runtime.durable.owner``).
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from runtime.backend import StoreBackend
from runtime.durable.store import RELEASE, ClaimOrder, EffectRecord, Holder, NewInterrupt, RunStore, StepCommit
from runtime.errors import ConflictError, LeaseLostError
from runtime.ids import new_id
from tests.store.contracts.conftest import open_again
from tests.store.contracts.test_run_store import new_run, runs, started

pytestmark = pytest.mark.anyio
HOST = "boot-1/pid:[1]/uid0@box"
DEAD, ALIVE = Holder(HOST, 100, 5), Holder(HOST, 200, 7)


async def succeed(store: RunStore, run_id: str, token: int) -> None:
    await store.commit(StepCommit(run_id, token, {**RELEASE, "status": "succeeded"}, [("run.state.changed", {})]))


async def keyed(store: RunStore, key: str | None, workflow: str = "wf") -> str:
    return await store.create(new_run(workflow, concurrency_key=key), [("run.created", {})])


# -- holders and takeover -------------------------------------------------------------------------
async def test_holders_are_the_processes_of_a_host_that_hold_running_runs(backend: StoreBackend) -> None:
    store = runs(backend)
    a, b, c, d = [await started(store) for _ in range(4)]
    await store.claim("dead", 30.0, 2, ["wf"], holder=DEAD)
    (third,) = await store.claim("alive", 30.0, 1, ["wf"], holder=ALIVE)
    await store.claim("elsewhere", 30.0, 1, ["wf"], holder=Holder("boot-2/pid:[1]/uid0@other", 100, 5))
    assert sorted(await store.holders(HOST)) == [(100, 5), (200, 7)]
    assert await runs(backend, "other").holders(HOST) == []  # per scope
    await succeed(store, c, third.token)
    assert await store.holders(HOST) == [(100, 5)]  # a run that left running is held by nobody
    assert await store.holders("boot-3/nobody") == []
    assert (await store.get(d)).lease_owner == "elsewhere"
    assert {(await store.get(x)).lease_owner for x in (a, b)} == {"dead"}


async def test_take_over_requeues_only_the_ended_holders_runs_and_fences_its_token_out(backend: StoreBackend) -> None:
    store = runs(backend)
    mine, theirs, same_pid_later = [await started(store) for _ in range(3)]
    (old,) = await store.claim("dead", 3600.0, 1, ["wf"], holder=DEAD)
    await store.claim("alive", 3600.0, 1, ["wf"], holder=ALIVE)
    await store.claim("reused", 3600.0, 1, ["wf"], holder=Holder(HOST, 100, 9))  # pid 100 again, a later process
    assert not await store.needs_reaping()  # no lease has run out: only takeover can hand the run on
    assert await store.take_over(HOST, 100, 5) == [mine]
    assert await store.take_over(HOST, 100, 5) == []  # once
    assert await store.take_over("boot-2/other", 200, 7) == []  # another host's holder is not this one
    queued = await store.get(mine)
    assert queued.status == "queued" and queued.lease_owner is None
    assert {(await store.get(x)).status for x in (theirs, same_pid_later)} == {"running"}
    events = await store.events(mine, 0, 100)
    assert [(e.type, e.data) for e in events[-2:]] == [
        ("lease.taken_over", {"worker": "dead", "token": old.token}),
        ("run.state.changed", {"status": "queued", "reason": "its worker's process ended"}),
    ]
    (new,) = await store.claim("new", 30.0, 1, ["wf"], holder=ALIVE)
    assert new.id == mine and new.token == old.token + 1
    with pytest.raises(LeaseLostError):  # the ended holder's late commit (a frozen process) changes nothing
        await store.commit(StepCommit(mine, old.token, {"state": '{"late": 1}'}, []))
    assert (await store.get(mine)).state == {"n": 1}


async def test_take_over_settles_in_flight_effects_as_an_expired_lease_does(backend: StoreBackend) -> None:
    store = runs(backend)
    paying, cancelling = await started(store), await started(store)
    (pay,) = await store.claim("dead", 3600.0, 1, ["wf"], holder=DEAD)
    await store.claim("dead", 3600.0, 1, ["wf"], holder=DEAD)
    await store.record_effect(
        paying, pay.token, EffectRecord("eff_p", "first", 1, "pay", "non_idempotent", "dispatched")
    )
    await store.cancel(cancelling, "enough")
    assert sorted(await store.take_over(HOST, 100, 5)) == sorted([paying, cancelling])
    review = await store.get(paying)
    assert review.status == "needs_review" and "resolve_effect" in (review.error or "")
    assert [e.status for e in await store.effects(None, paying)] == ["ambiguous"]
    assert (await store.get(cancelling)).status == "cancelled"


# -- concurrency limits ---------------------------------------------------------------------------
async def test_a_limit_lets_n_runs_of_a_workflow_run_at_once_and_the_rest_wait_first_in_first_out(
    backend: StoreBackend,
) -> None:
    store = runs(backend)
    ids = [await started(store) for _ in range(5)]
    free = await started(store, "free_wf")
    limits = {"wf": 2}
    claimed = await store.claim("w1", 30.0, 10, ["wf", "free_wf"], limits=limits)
    assert [c.id for c in claimed] == [ids[0], ids[1], free]  # a workflow without a limit is claimed beside
    assert await store.claim("w2", 30.0, 10, ["wf"], limits=limits) == []
    assert await store.next_ready(["wf"], limits=limits) is None  # its group is full: nothing to look at
    assert await store.next_ready(["wf"]) is not None  # (without the limit there would be)
    await succeed(store, ids[1], claimed[1].token)
    ready = await store.next_ready(["wf"], limits=limits)
    assert ready is not None and ready == (await store.get(ids[2])).next_at
    assert [c.id for c in await store.claim("w2", 30.0, 10, ["wf"], limits=limits)] == [ids[2]]
    await succeed(store, ids[0], claimed[0].token)
    assert [c.id for c in await store.claim("w3", 30.0, 10, ["wf"], limits={"wf": 3})] == ids[3:]  # a raised limit


async def test_a_concurrency_key_limits_each_key_on_its_own(backend: StoreBackend) -> None:
    store = runs(backend)
    ann1, ann2, bob1, keyless1, keyless2 = [
        await keyed(store, key) for key in ("ann", "ann", "bob", None, None)
    ]  # fmt: skip
    limits = {"wf": 1}
    first = await store.claim("w", 30.0, 10, ["wf"], limits=limits)
    assert [c.id for c in first] == [ann1, bob1, keyless1]  # one per key; keyless runs share one group
    assert await store.claim("w", 30.0, 10, ["wf"], limits=limits) == []
    await succeed(store, ann1, first[0].token)
    assert [c.id for c in await store.claim("w", 30.0, 10, ["wf"], limits=limits)] == [ann2]
    assert (await store.get(keyless2)).status == "queued"


async def test_a_run_waiting_on_an_interrupt_or_a_retry_holds_no_slot(backend: StoreBackend) -> None:
    store = runs(backend)
    asking, retrying, third = [await started(store) for _ in range(3)]
    limits = {"wf": 1}
    (claim,) = await store.claim("w", 30.0, 10, ["wf"], limits=limits)
    ask = NewInterrupt(new_id("int"), "first", 1, 0, "approval", "ok?", None, None)
    await store.park(asking, claim.token, ask, "{}")
    (claim,) = await store.claim("w", 30.0, 10, ["wf"], limits=limits)
    assert claim.id == retrying
    change = {**RELEASE, "status": "queued", "attempt": 2}
    await store.commit(StepCommit(retrying, claim.token, change, [("step.failed", {})], retry_in_s=3600.0))
    assert [c.id for c in await store.claim("w", 30.0, 10, ["wf"], limits=limits)] == [third]


@pytest.mark.parametrize("cap", [1, 3])
async def test_claimers_racing_on_one_store_never_run_more_than_the_limit(backend: StoreBackend, cap: int) -> None:
    """Backends on the same store stand in for worker processes; each claimed run is finished by its claimer."""
    store = runs(backend)
    ids = [await started(store) for _ in range(12)]
    others: list[StoreBackend] = [await open_again(backend), await open_again(backend)]
    held: set[str] = set()
    most, order = 0, []

    async def claimer(each: RunStore, owner: str) -> None:
        nonlocal most
        while len(order) < len(ids):
            claims = await each.claim(owner, 30.0, 2, ["wf"], limits={"wf": cap})
            held.update(c.id for c in claims)
            order.extend(c.id for c in claims)
            most = max(most, len(held))
            for c in claims:
                await anyio.lowlevel.checkpoint()  # let the other claimers try while this one runs
                held.discard(c.id)  # before its commit frees the slot in the store
                await succeed(each, c.id, c.token)
            if not claims:
                await anyio.sleep(0.005)  # pacing a poll, not ordering anything

    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for i, each in enumerate([backend, *others, backend, *others]):
                    tg.start_soon(claimer, runs(each), f"w{i}")
    finally:
        for other in others:
            await other.close()
    assert sorted(order) == sorted(ids) and most <= cap
    if cap == 1:
        assert order == ids  # one at a time: exactly first in, first out


async def test_a_limit_never_touches_another_scopes_runs(backend: StoreBackend) -> None:
    ours, theirs = runs(backend), runs(backend, "other")
    await started(theirs)
    (claim,) = await theirs.claim("w", 30.0, 1, ["wf"], limits={"wf": 1})
    mine = await started(ours)
    assert [c.id for c in await ours.claim("w", 30.0, 1, ["wf"], limits={"wf": 1})] == [mine]
    assert claim.token == 1


# -- the queue (every scope of the store, as workers claim) -----------------------------------------
async def test_the_queue_counts_a_limit_across_every_scope_of_the_store_per_key(backend: StoreBackend) -> None:
    queue, a, b = backend.queue(), runs(backend, "alpha"), runs(backend, "beta")
    await keyed(a, "k1")
    b_k1, b_k2 = await keyed(b, "k1"), await keyed(b, "k2")
    limits = {"wf": 1}
    (first,) = await queue.claim("w", 30.0, 1, ["wf"], limits=limits)  # the earliest: alpha's k1
    assert (first.tenant, first.project) == ("local", "alpha")
    rest = await queue.claim("w", 30.0, 10, ["wf"], limits=limits)
    assert [c.id for c in rest] == [b_k2]  # k1 is full in the store: beta's k1 waits for alpha's
    assert await queue.next_ready(["wf"], limits=limits) is None
    await succeed(a, first.id, first.token)
    assert await queue.next_ready(["wf"], limits=limits) is not None
    assert [c.id for c in await queue.claim("w", 30.0, 10, ["wf"], limits=limits)] == [b_k1]


async def test_the_queue_counts_keyless_runs_of_every_scope_as_one_group(backend: StoreBackend) -> None:
    queue, a, b = backend.queue(), runs(backend, "alpha"), runs(backend, "beta")
    await started(a)
    (held,) = await queue.claim("w", 30.0, 1, ["wf"], limits={"wf": 1})
    waiting = await started(b)
    assert await queue.claim("w", 30.0, 10, ["wf"], limits={"wf": 1}) == []
    assert [c.id for c in await queue.claim("w", 30.0, 10, ["wf"], limits={"wf": 2})] == [waiting]
    assert held.project == "alpha"


async def test_the_queue_lists_and_takes_over_an_ended_holders_runs_in_every_scope(backend: StoreBackend) -> None:
    queue, a, b = backend.queue(), runs(backend, "alpha"), runs(backend, "beta")
    in_a, in_b = await started(a), await started(b)
    claims = await queue.claim("dead", 3600.0, 2, ["wf"], holder=DEAD)
    assert {c.id for c in claims} == {in_a, in_b}
    await queue.claim("alive", 3600.0, 1, ["wf"], holder=ALIVE)  # nothing left to claim
    assert await queue.holders(HOST) == [(100, 5)]
    assert await a.holders(HOST) == [(100, 5)] and await runs(backend, "gamma").holders(HOST) == []
    assert await queue.reap() == []  # no lease ran out: only takeover hands the runs on
    assert sorted(await queue.take_over(HOST, 100, 5)) == sorted([in_a, in_b])
    assert await queue.take_over(HOST, 100, 5) == []
    assert (await a.get(in_a)).status == "queued" and (await b.get(in_b)).status == "queued"
    assert [e.type for e in await b.events(in_b, 0, 100)][-2:] == ["lease.taken_over", "run.state.changed"]
    assert await queue.holders(HOST) == []


async def test_the_queue_renews_releases_and_reads_cancels_of_the_leases_it_gave_in_every_scope(
    backend: StoreBackend,
) -> None:
    queue, a, b = backend.queue(), runs(backend, "alpha"), runs(backend, "beta")
    in_a, in_b = await started(a), await started(b)
    tokens = {c.id: c.token for c in await queue.claim("w", 30.0, 2, ["wf"])}
    held = [(in_a, tokens[in_a]), (in_b, tokens[in_b])]
    assert await queue.renew([*held, (in_a, tokens[in_a] + 1)], 60.0) == {in_a: "", in_b: ""}  # a stale token: none
    await b.cancel(in_b, "enough")
    assert await queue.cancel_requests([in_a, in_b]) == {in_b: "enough"}
    assert await queue.renew(held, 60.0) == {in_a: "", in_b: "enough"}
    await queue.release(held)
    assert await queue.reap() != []  # given up: handed on at once (in_b ends cancelled, as asked)
    assert (await a.get(in_a)).status == "queued" and (await b.get(in_b)).status == "cancelled"
    assert await queue.renew(held, 60.0) == {}


# -- a claim made by the commit that ends a run ----------------------------------------------------
async def test_an_ending_commit_claims_the_next_ready_run_of_any_scope_in_its_own_transaction(
    backend: StoreBackend,
) -> None:
    store, elsewhere = runs(backend), runs(backend, "other")
    ending = await started(store)
    (held,) = await store.claim("w", 30.0, 1, ["wf"], holder=ALIVE)
    waiting = await started(elsewhere)
    order = ClaimOrder("w", 30.0, 1, ["wf"], holder=ALIVE)
    done = {**RELEASE, "status": "succeeded"}
    with pytest.raises(LeaseLostError):  # a stale token: the run is not ended, and nothing is claimed
        await store.commit(StepCommit(ending, held.token + 1, done, [("run.state.changed", {})], then_claim=order))
    assert (await elsewhere.get(waiting)).status == "queued"
    (claim,) = await store.commit(StepCommit(ending, held.token, done, [("run.state.changed", {})], then_claim=order))
    assert (claim.id, claim.tenant, claim.project) == (waiting, "local", "other")
    assert (await store.get(ending)).status == "succeeded"
    run = await elsewhere.get(waiting)
    assert (run.status, run.lease_owner, run.lease_token) == ("running", "w", claim.token)
    assert [e.type for e in await elsewhere.events(waiting, 0, 10)][-2:] == ["run.state.changed", "step.started"]
    assert await store.commit(StepCommit(waiting, claim.token, {}, [], then_claim=order)) == []  # nothing left to claim
    assert (
        await elsewhere.commit(StepCommit(waiting, claim.token, done, [("run.state.changed", {})], then_claim=order))
        == []
    )


async def test_the_run_an_ending_commit_ends_no_longer_counts_against_its_workflows_limit(
    backend: StoreBackend,
) -> None:
    store, limits = runs(backend), {"wf": 1}
    ending = await started(store)
    (held,) = await store.claim("w", 30.0, 1, ["wf"], limits=limits)
    nxt = await started(store)
    assert await store.claim("w2", 30.0, 1, ["wf"], limits=limits) == []  # the one slot is taken
    order = ClaimOrder("w", 30.0, 1, ["wf"], limits=limits)
    done = {**RELEASE, "status": "succeeded"}
    (claim,) = await store.commit(StepCommit(ending, held.token, done, [("run.state.changed", {})], then_claim=order))
    assert claim.id == nxt


# -- priority -------------------------------------------------------------------------------------
async def test_higher_priority_runs_are_claimed_first_then_the_earliest(backend: StoreBackend) -> None:
    store = runs(backend)
    made = {p: [] for p in (0, 5, -3, 100)}  # type: dict[int, list[str]]
    for priority in (0, 5, -3, 5, 100, 0):
        made[priority].append(await started(store, priority=priority))
    order = [c.id for c in await store.claim("w", 30.0, 3, ["wf"])]
    order += [c.id for c in await store.claim("w", 30.0, 10, ["wf"])]
    assert order == [*made[100], *made[5], *made[0], *made[-3]]
    assert (await store.get(made[100][0])).priority == 100


async def test_priority_orders_claims_within_a_concurrency_limit_and_the_whole_queue(backend: StoreBackend) -> None:
    store, queue = runs(backend), backend.queue()
    low = await started(store, "capped", priority=-10)
    high = await started(store, "capped", priority=10)
    free = await started(store, "free", priority=1)
    other = await started(runs(backend, "other"), "free", priority=50)
    limits = {"capped": 1}
    claimed = [c.id for c in await queue.claim("w", 30.0, 10, ["capped", "free"], limits=limits)]
    assert claimed == [other, high, free]  # the limit lets one capped run go: the higher one
    assert low not in claimed


# -- the queued-run quota -------------------------------------------------------------------------
async def test_a_run_beyond_the_queued_quota_is_refused_naming_the_limit_and_the_count(backend: StoreBackend) -> None:
    store = runs(backend)
    for _ in range(3):
        await started(store, max_queued=3)
    with pytest.raises(ConflictError, match=r"has 3 queued runs, at its limit of 3 \(--max-queued-runs\)"):
        await started(store, max_queued=3)
    assert len(await store.page(None, None, None, 10)) == 3  # nothing written
    await started(runs(backend, "other"), max_queued=3)  # per tenant/project
    (claimed,) = await store.claim("w", 30.0, 1, ["wf"])  # a run that started is no longer queued
    await started(store, max_queued=3)
    assert claimed.id


async def test_creators_racing_at_the_quota_never_pass_it(backend: StoreBackend) -> None:
    other = await open_again(backend)  # another process on the store
    store, again = runs(backend), other.runs("local", "default")
    refused: list[Exception] = []

    async def create(target: RunStore) -> None:
        try:
            await started(target, max_queued=70)
        except ConflictError as exc:
            refused.append(exc)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(80):
                tg.start_soon(create, store if i % 2 else again)
    finally:
        await other.close()
    assert len(await store.page("queued", None, None, 100)) == 70 and len(refused) == 10


# -- fair claiming across tenants/projects --------------------------------------------------------
async def test_the_queue_serves_the_scope_with_fewest_running_runs_first(backend: StoreBackend) -> None:
    queue, a, b = backend.queue(), runs(backend, "alpha"), runs(backend, "beta")
    backlog = [await started(a) for _ in range(5)]
    single = await started(b)  # queued after all of A's
    assert [c.id for c in await queue.claim("w", 30.0, 2, ["wf"])] == backlog[:2]  # nobody runs: earliest first
    assert [c.id for c in await queue.claim("w", 30.0, 1, ["wf"])] == [single]  # A has 2 running, B none
    assert [c.id for c in await queue.claim("w", 30.0, 1, ["wf"])] == [backlog[2]]
    capped = await started(b, "capped")
    limits = {"capped": 1}
    claimed = await queue.claim("w", 30.0, 1, ["wf", "capped"], limits=limits)
    assert [c.id for c in claimed] == [capped]  # B has 1 running, A 3: B's run, under its workflow's limit


async def test_the_queue_walks_every_scope_with_ready_runs_across_tenants_and_projects(backend: StoreBackend) -> None:
    """The scopes are walked in (tenant, project) order a scope at a time: past a project to the next of its
    tenant, past a tenant to the next one; a scope whose queued runs the claimer does not serve gives none."""
    queue = backend.queue()
    a, b, c = backend.runs("t1", "p1"), backend.runs("t1", "p2"), backend.runs("t2", "p1")
    await started(backend.runs("t0", "p9"), "unserved")
    backlog = [await started(a) for _ in range(3)]
    low, high = await started(b), await started(b, priority=5)
    single = await started(c)
    first = await queue.claim("w", 30.0, 3, ["wf"])  # nobody runs: the highest priority, then the earliest
    assert [x.id for x in first] == [high, *backlog[:2]]
    second = await queue.claim("w", 30.0, 2, ["wf"])  # t2/p1 runs none, t1/p2 one, t1/p1 two
    assert {x.id for x in second} == {single, low}
    assert [x.id for x in await queue.claim("w", 30.0, 2, ["wf"])] == [backlog[2]]
    assert await queue.claim("w", 30.0, 2, ["wf"]) == []


async def test_fair_claimers_racing_on_one_store_take_every_run_once(backend: StoreBackend) -> None:
    """Backends on one store stand in for worker processes claiming through the fair queue at once."""
    ids = {await started(backend.runs(f"t{i % 3}", f"p{i % 2}")) for i in range(30)}
    others: list[StoreBackend] = [await open_again(backend), await open_again(backend)]
    taken: list[str] = []

    async def claimer(each: StoreBackend, owner: str) -> None:
        queue = each.queue()
        while len(taken) < len(ids):
            claims = await queue.claim(owner, 30.0, 2, ["wf"])
            taken.extend(c.id for c in claims)
            await anyio.lowlevel.checkpoint()
            if not claims:
                await anyio.sleep(0.005)  # pacing a poll, not ordering anything

    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for i, each in enumerate([backend, *others, backend, *others]):
                    tg.start_soon(claimer, each, f"w{i}")
    finally:
        for other in others:
            await other.close()
    assert sorted(taken) == sorted(ids)
