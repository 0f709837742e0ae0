"""The outbox of run notifications (``WebhookStore`` and the run changes that fill it), on every backend.

A run with a ``notify_url`` gets one delivery in the very transaction that moves it to a status it is
notified of (ended, waiting on a human): committed with it, or not at all. Deliveries are claimed
under a lease (a claim moves ``next_at`` on), so two senders never hold one, and a sender's record
of a try is fenced by the token of its claim.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from runtime.backend import StoreBackend
from runtime.durable.store import RELEASE, NewInterrupt, NewRun, RunStore
from runtime.durable.store_shared import Scope
from runtime.errors import LeaseLostError
from runtime.ids import new_id, now
from runtime.store.core import run_rows
from runtime.store.core.backend import CoreBackend
from runtime.store.core.webhooks import MAX_BODY
from runtime.webhooks.store import DELIVERED, PENDING, Attempt, Delivery, WebhookStore
from tests.store.contracts.conftest import open_again

pytestmark = pytest.mark.anyio
URL = "https://hooks.example.com/rath"


def webhooks(backend: StoreBackend) -> WebhookStore:
    store: WebhookStore = backend.webhooks()  # mypy checks the protocol here
    return store


async def started(store: RunStore, **fields: Any) -> str:
    new = NewRun(workflow="wf", plan_hash="h1", step="first", input_json='{"n": 1}', **fields)
    return await store.create(new, [("run.created", {"workflow": "wf"})])


async def ended(backend: StoreBackend, run_id: str, token: int, status: str = "succeeded") -> None:
    """The worker's fenced commit of a run's end (the update every commit of a step goes through)."""
    assert isinstance(backend, CoreBackend)
    change = {**RELEASE, "status": status, "result": '{"ok": true}'}
    await backend.ex.write(run_rows.update_run, run_id, token, change, [("run.state.changed", {"status": status})])


async def due(backend: StoreBackend, owner: str = "s1", at: float | None = None) -> list[Delivery]:
    return await webhooks(backend).claim(owner, now() if at is None else at, 60.0, 10)


async def test_a_run_that_ends_gets_one_delivery_in_the_transaction_that_ends_it(backend: StoreBackend) -> None:
    store = backend.runs("local", "default")
    notified = await started(store, notify_url=URL)
    quiet = await started(store)
    first, second = await store.claim("w", 30.0, 2, ["wf"])
    stale = first.token - 1
    with pytest.raises(LeaseLostError):  # a change that does not commit notifies nobody
        await ended(backend, first.id, stale)
    assert await due(backend) == []
    for claim in (first, second):
        await ended(backend, claim.id, claim.token)
    (delivery,) = await due(backend)
    assert (delivery.run_id, delivery.url, delivery.event, delivery.attempts) == (notified, URL, "run.succeeded", 0)
    body = json.loads(delivery.body)
    assert body["type"] == "run.succeeded" and body["timestamp"].endswith("Z")
    assert body["data"]["run_id"] == notified and body["data"]["status"] == "succeeded"
    assert body["data"]["result"] == {"ok": True}
    assert quiet not in {d.run_id for d in await due(backend, at=now() + 3600)}


async def test_a_parked_run_notifies_waiting_naming_its_interrupt_and_a_cancel_notifies_too(
    backend: StoreBackend,
) -> None:
    store = backend.runs("local", "default")
    run_id = await started(store, notify_url=URL)
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    asked = NewInterrupt(new_id("int"), "first", 1, 0, "approval", "ok?", None, None)
    await store.park(run_id, claim.token, asked, "{}")
    (waiting,) = await due(backend)
    body = json.loads(waiting.body)
    assert waiting.event == "run.waiting" and body["data"]["status"] == "waiting"
    assert [i["interrupt_id"] for i in body["data"]["pending_interrupts"]] == [asked.id]
    assert await webhooks(backend).record(waiting, Attempt(DELIVERED, now(), 200, None, now()))
    await store.cancel(run_id, "not needed")  # a run no worker holds ends through the plain update
    (cancelled,) = await due(backend)
    assert cancelled.id != waiting.id and cancelled.event == "run.cancelled"
    assert json.loads(cancelled.body)["data"]["pending_interrupts"] == []


async def test_a_claim_is_a_lease_and_a_try_is_recorded_only_by_its_holder(backend: StoreBackend) -> None:
    store = backend.runs("local", "default")
    run_id = await started(store, notify_url=URL)
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    await ended(backend, run_id, claim.token, "failed")
    at = now()
    (held,) = await due(backend, "a", at)
    assert await due(backend, "b", at + 59) == []  # held for the lease: 60 s
    (taken,) = await due(backend, "b", at + 61)  # a sender that died: another takes its delivery
    assert taken.id == held.id and taken.token == held.token + 1 and taken.body == held.body
    assert not await webhooks(backend).record(held, Attempt(DELIVERED, at, 200, None, at))
    assert await webhooks(backend).record(taken, Attempt(PENDING, at + 100, 500, "HTTP 500", at + 61))
    scope = Scope("local", "default")
    last = await webhooks(backend).last(scope, run_id)
    assert last == {
        "webhook_id": held.id, "event": "run.failed", "status": PENDING, "attempts": 1, "code": 500,
        "at": at + 61, "error": "HTTP 500", "next_at": at + 100,
    }  # fmt: skip
    assert await due(backend, "a", at + 99) == []
    (again,) = await due(backend, "a", at + 100)
    assert again.id == held.id and again.attempts == 1
    assert await webhooks(backend).record(again, Attempt(DELIVERED, at + 100, 204, None, at + 100))
    assert (await webhooks(backend).last(scope, run_id) or {})["status"] == DELIVERED
    assert await due(backend, "a", at + 10_000) == []  # delivered: never sent again
    assert await webhooks(backend).last(Scope("local", "other"), run_id) is None


async def test_concurrent_senders_never_claim_the_same_delivery(backend: StoreBackend) -> None:
    store = backend.runs("local", "default")
    for _ in range(12):
        await started(store, notify_url=URL)
    for claim in await store.claim("w", 30.0, 12, ["wf"]):
        await ended(backend, claim.id, claim.token)
    other = await open_again(backend)
    got: dict[str, list[str]] = {"a": [], "b": []}
    try:

        async def sender(on: StoreBackend, owner: str) -> None:
            for _ in range(4):
                got[owner] += [d.id for d in await webhooks(on).claim(owner, now(), 60.0, 2)]

        async with anyio.create_task_group() as tg:
            tg.start_soon(sender, backend, "a")
            tg.start_soon(sender, other, "b")
    finally:
        await other.close()
    taken = got["a"] + got["b"]
    assert len(taken) == len(set(taken)) == 12


async def test_senders_look_before_they_claim_and_only_finished_deliveries_are_pruned(backend: StoreBackend) -> None:
    store = backend.runs("local", "default")
    for _ in range(2):
        await started(store, notify_url=URL)
    for claim in await store.claim("w", 30.0, 2, ["wf"]):
        await ended(backend, claim.id, claim.token)
    outbox, at = webhooks(backend), now()
    assert await outbox.has_due(at) and not await outbox.has_due(at - 3600)
    over, pending = await due(backend, at=at)
    assert not await outbox.has_due(at)  # both held by the claim
    assert await outbox.record(over, Attempt(DELIVERED, at, 200, None, at))
    assert await outbox.prune(at + 10) == 1
    scope = Scope("local", "default")
    assert await outbox.last(scope, over.run_id) is None
    assert (await outbox.last(scope, pending.run_id) or {})["status"] == PENDING  # pending: never pruned
    assert await outbox.prune(at + 10) == 0


async def test_a_body_is_bounded_a_large_result_is_left_out(backend: StoreBackend) -> None:
    assert isinstance(backend, CoreBackend)
    store = backend.runs("local", "default")
    run_id = await started(store, notify_url=URL)
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    change = {**RELEASE, "status": "succeeded", "result": json.dumps({"text": "x" * 100_000})}
    await backend.ex.write(run_rows.update_run, run_id, claim.token, change, [("run.state.changed", {})])
    (delivery,) = await due(backend)
    assert len(delivery.body.encode()) <= MAX_BODY
    data = json.loads(delivery.body)["data"]
    assert data["truncated"] is True and data["result"] is None and data["run_id"] == run_id
