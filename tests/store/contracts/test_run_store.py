"""The ``RunStore`` contract, run on every backend: what durable execution may rely on from its store.

Runs are created, claimed, changed and reaped through the protocol alone (no SQL), so the same
tests hold a PostgreSQL backend to the same semantics. Leases that must have expired are taken
with a negative ``lease_s`` (expired when taken), not by waiting.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import anyio
import pytest

from runtime.backend import StoreBackend
from runtime.durable.models import Interrupt
from runtime.durable.store import (
    MAX_LOST_LEASES,
    RELEASE,
    EffectRecord,
    HeldStep,
    NewInterrupt,
    NewRun,
    RunStore,
    StepCommit,
    dumps,
)
from runtime.errors import ConflictError, InvalidInputError, LeaseLostError, NotFoundError
from runtime.flow.workflow import Decision
from runtime.ids import new_id, now
from tests.store.contracts.conftest import open_again

pytestmark = pytest.mark.anyio
EXPIRED = -1.0  # a lease_s whose lease is over the moment it is taken


def runs(backend: StoreBackend, project: str = "default") -> RunStore:
    store: RunStore = backend.runs("local", project)  # mypy checks the protocol here
    return store


def new_run(workflow: str = "wf", **fields: Any) -> NewRun:
    return NewRun(**{"workflow": workflow, "plan_hash": "h1", "step": "first", "input_json": '{"n": 1}', **fields})


async def started(store: RunStore, workflow: str = "wf", **fields: Any) -> str:
    return await store.create(new_run(workflow, **fields), [("run.created", {"workflow": workflow})])


async def test_a_created_run_is_queued_with_its_first_event_and_is_found_only_in_its_scope(
    backend: StoreBackend,
) -> None:
    store = runs(backend)
    run_id = await started(store, session_id=None, deadline=None)
    run = await store.get(run_id)
    assert (run.status, run.step, run.visit, run.attempt, run.state, run.input) == (
        "queued", "first", 1, 1, {"n": 1}, {"n": 1}
    )  # fmt: skip
    assert run.lease_token == 0 and run.lease_owner is None and run.pending_interrupts == ()
    assert [(e.seq, e.type) for e in await store.events(run_id, 0, 100)] == [(1, "run.created")]
    with pytest.raises(NotFoundError, match="run_list"):
        await runs(backend, "other").get(run_id)
    with pytest.raises(NotFoundError):
        await store.get("run_nope")
    with pytest.raises(NotFoundError):
        await store.events("run_nope", 0, 10)


async def test_an_idempotency_key_returns_the_same_run_and_refuses_a_different_request(backend: StoreBackend) -> None:
    store = runs(backend)
    first = await started(store, idempotency_key="k", request_hash="A")
    assert await started(store, idempotency_key="k", request_hash="A") == first
    with pytest.raises(ConflictError, match="idempotency key 'k'"):
        await started(store, idempotency_key="k", request_hash="B")
    assert await started(store, idempotency_key="k2", request_hash="A") != first
    assert await store.by_idempotency_key("k") == first and await store.by_idempotency_key("nope") is None
    assert await started(runs(backend, "other"), idempotency_key="k", request_hash="B") != first  # per scope
    assert len(await store.page(None, None, None, 10)) == 2


async def test_claims_take_the_earliest_runnable_runs_once_each_with_a_higher_token(backend: StoreBackend) -> None:
    store = runs(backend)
    assert await store.next_ready(["wf"]) is None
    ids = [await started(store) for _ in range(3)]
    later = await started(store, "other_wf")
    ready = await store.next_ready(["wf"])
    assert ready is not None and ready <= now()
    (a,) = await store.claim("w1", 30.0, 1, ["wf"])
    assert a.id == ids[0] and a.token == 1 and (a.step, a.visit, a.attempt) == ("first", 1, 1)
    assert a.state_json == a.input_json and a.lease_expires > now()
    rest = await store.claim("w2", 30.0, 10, ["wf"])
    assert [c.id for c in rest] == ids[1:]  # oldest first, none claimed twice
    assert await store.claim("w3", 30.0, 10, ["wf"]) == []
    assert await store.claim("w3", 30.0, 0, ["wf", "other_wf"]) == []
    assert await store.claim("w3", 30.0, 10, []) == []
    running = await store.get(ids[0])
    assert running.status == "running" and running.lease_owner == "w1" and running.lease_token == 1
    assert [e.type for e in await store.events(ids[0], 1, 10)] == ["run.state.changed", "step.started"]
    assert (await store.get(later)).status == "queued"  # a workflow nobody asked for stays put


async def test_a_stale_token_is_fenced_out_and_a_current_one_commits(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await started(store)
    (old,) = await store.claim("old", EXPIRED, 1, ["wf"])
    assert await store.needs_reaping()
    assert await store.reap() == [run_id]
    assert (await store.get(run_id)).status == "queued"
    (new,) = await store.claim("new", 30.0, 1, ["wf"])
    assert new.token == old.token + 1
    before = await store.get(run_id)
    with pytest.raises(LeaseLostError, match=f"fencing token {old.token} is stale"):
        await store.commit(StepCommit(run_id, old.token, {"state": '{"hacked": 1}'}, [("step.progress", {})]))
    with pytest.raises(LeaseLostError):
        await store.record_effect(
            run_id, old.token, EffectRecord("eff_x", "first", 1, "pay", "non_idempotent", "dispatched")
        )
    with pytest.raises(LeaseLostError):
        await store.park(run_id, old.token, _interrupt(ordinal=0), "{}")
    after = await store.get(run_id)
    assert after.state == before.state and after.last_seq == before.last_seq and after.lease_owner == "new"
    assert await store.effects(None, run_id) == [] and await store.interrupts(run_id) == []
    events = [("step.completed", {"step": "first"}), ("checkpoint.created", {"step": "first"})]
    await store.commit(StepCommit(run_id, new.token, {"state": '{"n": 2}', "step": "second", "visit": 2}, events,
                       checkpoint=('{"n": 2}', "second", [])))  # fmt: skip
    moved = await store.get(run_id)
    assert moved.state == {"n": 2} and moved.step == "second" and moved.visit == 2
    (checkpoint,) = await store.checkpoints(run_id)
    tail = await store.events(run_id, before.last_seq, 10)
    assert [e.type for e in tail] == ["step.completed", "checkpoint.created"]
    assert checkpoint["seq"] == tail[1].seq and checkpoint["state"] == {"n": 2} and checkpoint["next_step"] == "second"


def _step(name: str, following: str, n: int) -> HeldStep:
    """What the runner commits when step ``name`` ends and ``following`` starts, with ``{"n": n}``."""
    state = dumps({"n": n})
    events = [
        ("step.completed", {"step": name}),
        ("checkpoint.created", {"step": name}),
        ("step.started", {"step": following}),
    ]
    return HeldStep({"state": state, "step": following}, events, (state, following, []))


async def test_held_steps_are_made_first_in_order_in_the_commit_that_carries_them(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await started(store)
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    before = await store.get(run_id)
    last = _step("third", "fourth", 3)
    held = [_step("first", "second", 1), _step("second", "third", 2)]
    await store.commit(
        StepCommit(run_id, claim.token, last.change, list(last.events), checkpoint=last.checkpoint, held=held)
    )
    now_ = await store.get(run_id)
    assert now_.step == "fourth" and now_.state == {"n": 3} and now_.last_seq == before.last_seq + 9
    tail = await store.events(run_id, before.last_seq, 20)
    assert [(e.type, e.data["step"]) for e in tail] == [
        (kind, step)
        for name, following in (("first", "second"), ("second", "third"), ("third", "fourth"))
        for kind, step in (("step.completed", name), ("checkpoint.created", name), ("step.started", following))
    ]
    assert len({e.created_at for e in tail}) == 1  # one commit, one timestamp
    checkpoints = await store.checkpoints(run_id)
    assert [(c["state"]["n"], c["next_step"]) for c in checkpoints] == [(1, "second"), (2, "third"), (3, "fourth")]
    assert [c["seq"] for c in checkpoints] == [e.seq for e in tail if e.type == "checkpoint.created"]


async def test_a_stale_token_commits_none_of_the_held_steps(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await started(store)
    (old,) = await store.claim("old", EXPIRED, 1, ["wf"])
    await store.reap()
    await store.claim("new", 30.0, 1, ["wf"])
    before = await store.get(run_id)
    last = _step("second", "third", 2)
    with pytest.raises(LeaseLostError):
        await store.commit(
            StepCommit(run_id, old.token, last.change, list(last.events), held=[_step("first", "second", 1)])
        )
    after = await store.get(run_id)
    assert (after.state, after.step, after.last_seq) == (before.state, before.step, before.last_seq)
    assert await store.checkpoints(run_id) == []


async def test_a_finished_run_gives_its_lease_up_and_no_token_commits_to_it_again(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await started(store)
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    await store.commit(StepCommit(run_id, claim.token, {**RELEASE, "status": "succeeded"}, [("run.state.changed", {})]))
    done = await store.get(run_id)
    assert done.status == "succeeded" and done.lease_owner is None
    with pytest.raises(LeaseLostError):
        await store.commit(StepCommit(run_id, claim.token, {}, []))
    assert await store.renew([(run_id, claim.token)], 30.0) == {}
    with pytest.raises(ValueError, match="not run fields"):
        await store.commit(StepCommit(run_id, claim.token, {"tenant": "x"}, []))


async def test_events_are_numbered_in_order_and_paged(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await started(store)
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    for i in range(5):
        await store.commit(StepCommit(run_id, claim.token, {}, [("step.progress", {"i": i})]))
    events = await store.events(run_id, 0, 100)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.data["i"] for e in events if e.type == "step.progress"] == [0, 1, 2, 3, 4]
    page = await store.events(run_id, 3, 2)
    assert [e.seq for e in page] == [4, 5]
    assert (await store.get(run_id)).last_seq == events[-1].seq


async def test_a_note_appends_events_to_any_run_of_its_scope_and_changes_nothing_else(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await started(store)
    await store.note(run_id, [("task.created", {"ttl_ms": 60000})])
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    await store.note(run_id, [("task.noted", {})])  # held by a worker: its lease goes on unchanged
    await store.commit(StepCommit(run_id, claim.token, {}, [("step.progress", {})]))
    run = await store.get(run_id)
    assert run.status == "running" and run.lease_token == claim.token
    types = [e.type for e in await store.events(run_id, 0, 100) if e.type.startswith(("task.", "step.p"))]
    assert types == ["task.created", "task.noted", "step.progress"]
    with pytest.raises(NotFoundError):
        await runs(backend, "elsewhere").note(run_id, [("task.created", {})])
    with pytest.raises(NotFoundError):
        await store.note(new_id("run"), [("task.created", {})])


async def test_renew_reports_held_leases_and_cancels_and_release_hands_runs_on_without_counting(
    backend: StoreBackend,
) -> None:
    store = runs(backend)
    a, b = await started(store), await started(store)
    claims = {c.id: c for c in await store.claim("w", 30.0, 2, ["wf"])}
    held = [(a, claims[a].token), (b, claims[b].token)]
    assert await store.renew([*held, (a, claims[a].token + 7)], 30.0) == {a: "", b: ""}
    await store.cancel(b, "enough")
    assert await store.cancel_requests([a, b]) == {b: "enough"}
    assert await store.renew(held, 30.0) == {a: "", b: "enough"}
    assert (await store.get(b)).status == "running" and (await store.get(b)).cancel_requested
    # a lease given up on shutdown is handed on at once, and never counts as a lost worker
    for _ in range(MAX_LOST_LEASES + 1):
        await store.release([(a, claims[a].token)])
        assert await store.reap() != []
        assert (await store.get(a)).status == "queued"
        claims[a] = next(c for c in await store.claim("w", 30.0, 1, ["wf"]) if c.id == a)


async def test_a_lease_given_up_is_not_renewed_by_its_worker_before_the_reaper_hands_it_on(
    backend: StoreBackend,
) -> None:
    # A worker hands a run back (its commit's outcome unknown) while its renew loop, retried through the
    # same outage, still lists the lease: the renewal that lands after the release must not take the run
    # up again for a whole lease (before, it did, and the run sat until the lease ran out).
    store = runs(backend)
    run_id = await started(store)
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    await store.release([(run_id, claim.token)])
    assert await store.renew([(run_id, claim.token)], 30.0) == {}  # no longer held
    assert await store.reap() == [run_id]
    assert (await store.get(run_id)).status == "queued"
    assert [c.id for c in await store.claim("v", 30.0, 1, ["wf"])] == [run_id]


async def test_a_step_that_keeps_losing_its_worker_fails_its_run(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await started(store)
    for lost in range(1, MAX_LOST_LEASES + 1):
        await store.claim("dies", EXPIRED, 1, ["wf"])
        assert await store.reap() == [run_id]
        status = (await store.get(run_id)).status
        assert status == ("failed" if lost == MAX_LOST_LEASES else "queued")
    assert f"lost its worker {MAX_LOST_LEASES} times" in ((await store.get(run_id)).error or "")
    assert not await store.needs_reaping()


async def test_the_effects_ledger_replays_settles_and_resolves(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await started(store)
    (claim,) = await store.claim("w", EXPIRED, 1, ["wf"])
    pay = EffectRecord("eff_pay", "first", 1, "pay", "non_idempotent", "dispatched")
    fetch = EffectRecord("eff_fetch", "first", 1, "fetch", "idempotent", "dispatched")
    done = EffectRecord("eff_done", "first", 1, "done", "idempotent", "dispatched")
    for record in (pay, fetch, done):
        assert (await store.record_effect(run_id, claim.token, record)).status == "dispatched"
    stored = await store.record_effect(
        run_id, claim.token, EffectRecord("eff_done", "first", 1, "done", "idempotent", "succeeded", dumps({"ok": 1}))
    )
    assert stored.status == "succeeded" and stored.result == {"ok": 1} and stored.key == "done"
    assert {e.key: e.status for e in await store.visit_effects(run_id, 1)} == {
        "pay": "dispatched", "fetch": "dispatched", "done": "succeeded"
    }  # fmt: skip
    assert await store.visit_effects(run_id, 2) == []
    # the worker vanishes: its non-idempotent effect is ambiguous, the idempotent one may run again
    assert await store.reap() == [run_id]
    assert {e.key: e.status for e in await store.effects(None, run_id)} == {
        "pay": "ambiguous", "fetch": "prepared", "done": "succeeded"
    }  # fmt: skip
    review = await store.get(run_id)
    assert review.status == "needs_review" and "eff_pay" in (review.error or "")
    assert [e.id for e in await store.effects("ambiguous", None)] == ["eff_pay"]
    with pytest.raises(ConflictError, match="not ambiguous"):
        await store.settle_effect("eff_fetch", True, None)
    with pytest.raises(NotFoundError, match="effect_list"):
        await store.settle_effect("eff_nope", True, None)
    with pytest.raises(NotFoundError):
        await runs(backend, "other").settle_effect("eff_pay", True, None)
    assert await store.settle_effect("eff_pay", True, dumps({"paid": 5})) == run_id
    (paid,) = [e for e in await store.effects(None, run_id) if e.key == "pay"]
    assert paid.status == "succeeded" and paid.result == {"paid": 5}
    resumed = await store.get(run_id)
    assert resumed.status == "queued" and resumed.error is None
    assert [e.type for e in await store.events(run_id, 0, 100)][-2:] == ["effect.resolved", "run.state.changed"]


async def test_a_failing_step_settles_its_in_flight_effects_in_the_same_commit(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await started(store)
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    await store.record_effect(
        run_id, claim.token, EffectRecord("eff_a", "first", 1, "a", "non_idempotent", "dispatched")
    )
    change = {**RELEASE, "status": "needs_review", "error": "in flight"}
    await store.commit(
        StepCommit(run_id, claim.token, change, [("step.failed", {})], settle=True, tail=[("run.state.changed", {})])
    )
    types = [e.type for e in await store.events(run_id, 0, 100)]
    assert types[-3:] == ["step.failed", "effect.ambiguous", "run.state.changed"]
    assert [e.status for e in await store.effects(None, run_id)] == ["ambiguous"]
    assert (await store.get(run_id)).status == "needs_review"


def _interrupt(ordinal: int, *, schema: dict[str, Any] | None = None, expires_at: float | None = None) -> NewInterrupt:
    return NewInterrupt(new_id("int"), "first", 1, ordinal, "approval", "ok?", schema, expires_at)


async def test_an_interrupt_parks_its_run_and_a_decision_queues_it_again(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await started(store)
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    asked = _interrupt(0, schema={"type": "object", "required": ["why"]})
    await store.park(run_id, claim.token, asked, '{"n": 1}')
    parked = await store.get(run_id)
    assert parked.status == "waiting" and parked.lease_owner is None
    assert [i.id for i in parked.pending_interrupts] == [asked.id]
    assert [i.id for i in await store.interrupts(None)] == [asked.id] == [i.id for i in await store.interrupts(run_id)]
    assert await runs(backend, "other").interrupts(None) == []
    (checkpoint,) = await store.checkpoints(run_id)
    assert checkpoint["pending"] == [asked.id] and checkpoint["next_step"] == "first"
    by_ordinal = await store.visit_interrupts(run_id, 1)
    assert list(by_ordinal) == [0] and by_ordinal[0].schema_ == {"type": "object", "required": ["why"]}
    with pytest.raises(LeaseLostError):  # parking gave the lease up
        await store.commit(StepCommit(run_id, claim.token, {}, []))

    def refuse(interrupt: Interrupt) -> None:
        assert interrupt.id == asked.id and interrupt.status == "pending"
        raise InvalidInputError("the value does not match")

    decision = Decision(action="approve", actor="me")
    with pytest.raises(InvalidInputError):
        await store.decide(asked.id, decision, refuse)
    assert (await store.get(run_id)).status == "waiting"  # a refused decision changes nothing
    with pytest.raises(NotFoundError, match="interrupt_list"):
        await store.decide("int_nope", decision, lambda i: None)
    assert await store.decide(asked.id, decision, lambda i: None) == run_id
    with pytest.raises(ConflictError, match="already decided"):
        await store.decide(asked.id, decision, lambda i: None)
    resumed = await store.get(run_id)
    assert resumed.status == "queued" and resumed.pending_interrupts == ()
    (decided,) = (await store.visit_interrupts(run_id, 1)).values()
    assert decided.status == "decided" and decided.decision == decision
    (again,) = await store.claim("w", 30.0, 1, ["wf"])
    assert again.token == claim.token + 1 and again.step == "first" and again.visit == 1


async def test_expired_interrupts_and_passed_deadlines_time_runs_out(backend: StoreBackend) -> None:
    store = runs(backend)
    asking = await started(store)
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    asked = _interrupt(0, expires_at=now() - 1)
    await store.park(asking, claim.token, asked, "{}")
    late = await started(store, deadline=now() - 1)
    assert await store.needs_reaping()
    assert sorted(await store.reap()) == sorted([asking, late])
    timed_out = await store.get(asking)
    assert timed_out.status == "timed_out" and asked.id in (timed_out.error or "")
    assert (await store.visit_interrupts(asking, 1))[0].status == "expired"
    assert (await store.get(late)).status == "timed_out"
    assert not await store.needs_reaping() and await store.reap() == []


async def test_cancel_ends_a_run_no_worker_holds_and_asks_a_running_ones_worker(backend: StoreBackend) -> None:
    store = runs(backend)
    queued, running = await started(store), await started(store)
    await store.claim("w", 30.0, 1, ["wf"])  # takes ``queued``, the older one
    queued, running = running, queued
    await store.cancel(queued, "no longer needed")
    ended = await store.get(queued)
    assert ended.status == "cancelled" and ended.error == "cancelled: no longer needed"
    await store.cancel(running, None)
    asked = await store.get(running)
    assert asked.status == "running" and asked.cancel_requested
    assert await store.cancel_requests([running]) == {running: None}
    last = (await store.get(queued)).last_seq
    await store.cancel(queued, "again")  # terminal: left alone
    assert (await store.get(queued)).last_seq == last
    with pytest.raises(NotFoundError):
        await store.cancel("run_nope", None)


async def test_pages_and_id_search_are_newest_first_and_scoped(backend: StoreBackend) -> None:
    store = runs(backend)
    ids = [await started(store, "a" if i % 2 else "b") for i in range(5)]
    foreign = await started(runs(backend, "other"))
    newest_first = sorted(ids, reverse=True)
    assert [r.id for r in await store.page(None, None, None, 10)] == newest_first
    assert [r.id for r in await store.page(None, "a", None, 10)] == [i for i in newest_first if i in ids[1::2]]
    assert [r.id for r in await store.page(None, None, newest_first[1], 2)] == newest_first[2:4]
    assert await store.page("running", None, None, 10) == []
    assert await store.ids("", 100) == newest_first and foreign not in await store.ids("", 100)
    assert await store.ids(newest_first[2], 10) == [newest_first[2]]
    assert await store.ids("run_", 2) == newest_first[:2]
    assert await store.ids("zzz", 10) == []


async def test_watch_reports_another_writers_changes_or_says_polling_must(backend: StoreBackend) -> None:
    """A second backend on the same store stands in for another process."""
    store = runs(backend)
    seen: list[Sequence[str]] = []
    heard = anyio.Event()

    def changed(run_ids: Sequence[str]) -> None:
        seen.append(run_ids)
        heard.set()

    other: StoreBackend = await open_again(backend)
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                listening = await tg.start(partial(store.watch, changed))
                run_id = await started(other.runs("local", "default"))
                if listening:
                    while not any(run_id in ids or not ids for ids in seen):
                        await heard.wait()
                        heard = anyio.Event()
                    tg.cancel_scope.cancel()
        if not listening:  # it returned at once, telling nothing: the runtime polls instead
            assert seen == []
        assert (await store.get(run_id)).status == "queued"
    finally:
        await other.close()


async def test_concurrent_claimers_on_one_store_never_take_the_same_run(backend: StoreBackend) -> None:
    """Two backends on the same store stand in for worker processes claiming at once."""
    ids = {await started(runs(backend)) for _ in range(20)}
    other: StoreBackend = await open_again(backend)
    taken: list[str] = []
    try:

        async def claimer(store: RunStore, owner: str) -> None:
            while claims := await store.claim(owner, 30.0, 3, ["wf"]):
                taken.extend(c.id for c in claims)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i, each in enumerate([backend, other, backend, other]):
                    tg.start_soon(claimer, runs(each), f"w{i}")
    finally:
        await other.close()
    assert sorted(taken) == sorted(ids)


async def test_a_retry_is_claimable_only_its_backoff_after_the_failing_commit(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await started(store)
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    change = {**RELEASE, "status": "queued", "attempt": 2, "error": "boom"}
    await store.commit(StepCommit(run_id, claim.token, change, [("step.failed", {})], settle=True, retry_in_s=3600.0))
    failed = [e for e in await store.events(run_id, 0, 100) if e.type == "step.failed"][-1]
    queued = await store.get(run_id)
    assert queued.status == "queued" and queued.next_at == failed.created_at + 3600.0
    assert await store.claim("w", 30.0, 1, ["wf"]) == []  # not before its backoff
    assert await store.next_ready(["wf"]) == queued.next_at


async def test_the_queue_claims_and_reaps_across_scopes_and_each_claim_names_its_runs_scope(
    backend: StoreBackend,
) -> None:
    queue = backend.queue()
    a, b = backend.runs("acme", "alpha"), backend.runs("bravo", "beta")
    assert await queue.next_ready(["wf"]) is None and not await queue.needs_reaping()
    in_a, in_b = await started(a), await started(b)
    ready = await queue.next_ready(["wf"])
    assert ready is not None and ready <= now()
    assert await a.claim("scoped", 30.0, 10, ["other"]) == []
    claims = await queue.claim("w", EXPIRED, 10, ["wf"])
    assert {(c.id, c.tenant, c.project) for c in claims} == {(in_a, "acme", "alpha"), (in_b, "bravo", "beta")}
    assert await queue.claim("w", 30.0, 10, ["wf"]) == []  # none claimed twice
    assert await a.needs_reaping() and await queue.needs_reaping()
    assert sorted(await queue.reap()) == sorted([in_a, in_b])  # both scopes' expired leases, one call
    assert (await a.get(in_a)).status == "queued" and (await b.get(in_b)).status == "queued"
    (only_a,) = await a.claim("scoped", 30.0, 10, ["wf"])  # a scoped store still claims only its own
    assert (only_a.id, only_a.tenant, only_a.project) == (in_a, "acme", "alpha")
    late = await started(b, deadline=now() - 1)
    assert await queue.needs_reaping() and not await a.needs_reaping()
    assert await queue.reap() == [late] and (await b.get(late)).status == "timed_out"
