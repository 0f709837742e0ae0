"""The durable layer's ``RunQueue`` and ``RunStore`` (``runtime.durable.store``), written once.

The operations are the functions here (the writes) and in ``run_reads``, ``run_rows``, ``claims``,
``reap`` and ``decisions``; ``CoreRunQueue``/``CoreRunStore`` run each on an ``Executor`` as one unit
of work. Each write tells other processes which runs it changed where it changes them (``run_rows.changed``:
PostgreSQL NOTIFYs on commit; SQLite cannot, its runtimes poll). What stays a backend's own is in
``runtime/store/postgres/runs.py``: ``watch``, and the step commits it makes many at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from anyio.abc import TaskStatus

from runtime.durable.models import TERMINAL, Effect
from runtime.durable.store import (
    Claim,
    ClaimOrder,
    EffectRecord,
    EventSpec,
    HeldStep,
    Holder,
    Limits,
    NewInterrupt,
    NewRun,
    RunChange,
    StepCommit,
    dumps,
)
from runtime.durable.store_shared import Scope, idempotency_conflict
from runtime.errors import ConflictError
from runtime.ids import now
from runtime.store.core import claims, decisions, reap, webhooks
from runtime.store.core.dialect import Dialect
from runtime.store.core.id_search import ids_by_prefix
from runtime.store.core.run_reads import (
    by_idempotency_key,
    cancel_requests,
    checkpoints,
    effects,
    events,
    get,
    interrupts,
    page,
    visit_effects,
    visit_interrupts,
)
from runtime.store.core.run_rows import (
    CANCEL_CHANNEL,
    RELEASED,
    changed,
    end_unheld,
    has_reapable,
    insert_queued_below,
    insert_run,
    lock_held,
    run_row,
    update_run,
)
from runtime.store.core.sessions import insert_one
from runtime.store.core.statements import (
    Executor,
    Failed,
    Op,
    Row,
    Scoped,
    none,
    one,
    rows,
    scoped,
    unscoped,
    value,
)

log = logging.getLogger(__name__)

#: A claim of this many runs at most, and a commit of this many events at most whose texts (state, result,
#: error) stay under ``SMALL_TEXT`` characters, are small writes (``Executor.write``'s ``small``: SQLite
#: commits one made alone on the event loop's thread). (Events carry ids and names, and a step's error,
#: which the run's ``error`` carries too.)
SMALL_ROWS = 8
SMALL_TEXT = 64_000


def small_commit(change: RunChange, events: Sequence[EventSpec], held: Sequence[HeldStep] = ()) -> bool:
    """Whether a commit (with the held steps it makes first) is small: each step's events, and all texts."""
    if len(events) > SMALL_ROWS or any(len(step.events) > SMALL_ROWS for step in held):
        return False
    changes = [change, *(step.change for step in held)]
    return sum(len(v) for c in changes for v in c.values() if isinstance(v, str)) < SMALL_TEXT


# -- writes -------------------------------------------------------------------------------------
def create(d: Dialect, scope: Scope, new: NewRun, first: Sequence[EventSpec]) -> Op[str]:
    key = new.idempotency_key
    if key is not None:
        if d.xact_lock:  # two creators with one key at once: the second waits for the first's commit
            yield value(d.xact_lock, f"{scope.tenant}/{scope.project}/{key}", 0)
        old = yield one(
            "SELECT id, request_hash FROM runs WHERE tenant = ? AND project = ? AND idempotency_key = ?",
            scope.tenant, scope.project, key,
        )  # fmt: skip
        if old is not None:
            if old["request_hash"] != new.request_hash:
                raise idempotency_conflict(key, old["id"], old["request_hash"], new.request_hash)
            return str(old["id"])
    if d.arrays:  # one statement, while the scope is far enough from its limit not to need the lock below
        below = None if new.max_queued is None else new.max_queued - QUOTA_SLACK
        made = yield from insert_queued_below(d, scope, new.columns(), first, below)
        if made is not None:
            return made
    if new.max_queued is not None:
        yield from _within_quota(d, scope, new.max_queued)
    return (yield from insert_run(d, scope, new.columns(), first))


_QUEUED = "SELECT COUNT(*) FROM runs WHERE tenant = ? AND project = ? AND status = 'queued'"  # index runs_scope_status
#: Where creators run at once (PostgreSQL), a count this close to the limit is taken again under a lock of the
#: scope, so that creators near the limit queue and none passes it; far from it, creators do not wait on each other.
QUOTA_SLACK = 64


def _within_quota(d: Dialect, scope: Scope, limit: int) -> Op[None]:
    queued = int((yield value(_QUEUED, scope.tenant, scope.project)) or 0)
    if d.xact_lock and queued >= limit - QUOTA_SLACK:
        yield value(d.xact_lock, f"{scope.tenant}/{scope.project}/queued", 0)
        queued = int((yield value(_QUEUED, scope.tenant, scope.project)) or 0)
    if queued >= limit:
        raise ConflictError(
            f"{scope.tenant}/{scope.project} has {queued} queued runs, at its limit of {limit} "
            "(--max-queued-runs): wait for some to start, or cancel some with run_cancel"
        )


def cancel(d: Dialect, scope: Scope, run_id: str, reason: str | None) -> Op[None]:
    row = yield from run_row(d, scope, run_id, lock=True)
    if row["status"] in TERMINAL:
        return
    if row["status"] == "running":
        asked: list[EventSpec] = [("run.cancel_requested", {"reason": reason})]
        yield from update_run(d, run_id, None, {"cancel_requested": 1, "cancel_reason": reason}, asked)
        yield from changed(d, [run_id], CANCEL_CHANNEL)  # its worker, wherever it is
        return
    sets = {"error": f"cancelled: {reason or 'by request'}", "cancel_requested": 1}
    yield from end_unheld(d, run_id, "cancelled", reason, sets)


def note(d: Dialect, scope: Scope, run_id: str, noted: Sequence[EventSpec]) -> Op[None]:
    yield from run_row(d, scope, run_id)  # another scope's run is not found
    yield from update_run(d, run_id, None, {}, noted)


def renew(d: Dialect, leases: Sequence[tuple[str, int]], lease_s: float) -> Op[dict[str, str]]:
    """Extend held leases. Returns, for each lease still held, the pending cancel reason ('' = none).

    A lease given up (``release``) is no longer held, though its token still matches until the reaper
    hands the run on: a renewal that commits after the release (a worker's renew loop, retried through
    an outage while the same worker hands the run back) must not take it up again for ``lease_s``."""
    if not leases:
        return {}
    held, args = d.table("l", _LEASE, leases)
    found = yield rows(
        f"UPDATE runs SET lease_expires = ? FROM {held} WHERE {_HELD} AND runs.lease_expires <> ? "
        "RETURNING runs.id, runs.cancel_requested, runs.cancel_reason",
        now() + lease_s, *args, RELEASED,  # a lease given up is not renewed
    )  # fmt: skip
    return {r["id"]: (r["cancel_reason"] or "cancelled") if r["cancel_requested"] else "" for r in found}


def release(d: Dialect, leases: Sequence[tuple[str, int]]) -> Op[None]:
    """Give up held leases (worker shutdown) so that any worker can recover their runs at once."""
    if not leases:
        return
    held, args = d.table("l", _LEASE, leases)
    found = yield rows(
        f"UPDATE runs SET lease_expires = ? FROM {held} WHERE {_HELD} RETURNING runs.id", RELEASED, *args
    )
    yield from changed(d, [r["id"] for r in found])


#: Leases as a table ``l`` (``Dialect.table``), and the runs holding them.
_LEASE = {"id": "text", "token": "bigint"}
_HELD = "runs.id = l.id AND runs.lease_token = l.token AND runs.status = 'running'"


def commit(d: Dialect, scope: Scope, c: StepCommit) -> Op[list[Row]]:
    """``RunStore.commit``: the held steps, then this one, each fenced by ``c.token``; then the claim of
    ``c.then_claim`` (the rows claimed)."""
    at = now()
    for step in c.held:
        yield from update_run(d, c.run_id, c.token, step.change, step.events, step.checkpoint, at)
    todo = list(c.events)
    if c.settle:
        yield from lock_held(d, c.run_id, c.token)  # the run first, then its effects
        yield from reap.settle_in_flight(d, c.run_id, todo)
    todo += c.tail
    row = c.change if c.retry_in_s is None else {**c.change, "next_at": at + c.retry_in_s}
    if c.output_session is not None:
        made = yield from insert_one(d, (scope.tenant, scope.project), c.output_session)
        row = {**row, "output_session_id": made.id}
    yield from update_run(d, c.run_id, c.token, row, todo, c.checkpoint, at)
    return [] if c.then_claim is None else (yield from _claim_within(d, c.then_claim))


def _claim_within(d: Dialect, order: ClaimOrder) -> Op[list[Row]]:
    """``order``'s claim, every scope, in the commit that ended another run; under a savepoint, so that a
    claim the database refuses (logged) rolls back alone and the commit still goes in. The savepoint is
    not released (on PostgreSQL a round trip): the transaction's COMMIT, or the batch's next RELEASE of
    the savepoint its write runs under, releases it with the rest."""
    yield none("SAVEPOINT claim")
    try:
        return (yield from claims.claim(d, None, order))
    except Failed:
        yield none("ROLLBACK TO SAVEPOINT claim")
        log.exception("could not claim a run in the commit that ended another; the worker claims it next")
        return []


def run_ids(d: Dialect, scope: Scope, prefix: str, limit: int) -> Op[list[str]]:
    return (yield from ids_by_prefix(d, "runs", scope.tenant, scope.project, prefix, limit))


def record_effect(d: Dialect, scope: Scope, run_id: str, token: int, record: EffectRecord) -> Op[Effect]:
    event = (f"effect.{record.status}", {"effect_id": record.id, "key": record.key})
    yield from update_run(d, run_id, token, {}, [event])
    at = now()
    found = yield one(
        "INSERT INTO run_effects (id, run_id, tenant, project, step, visit, key, effect_class, status, "
        "result, error, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET status = excluded.status, result = excluded.result, "
        "error = excluded.error, effect_class = excluded.effect_class, updated_at = excluded.updated_at "
        "RETURNING *",
        record.id, run_id, scope.tenant, scope.project, record.step, record.visit, record.key,
        record.effect_class, record.status, record.result_json, record.error, at, at,
    )  # fmt: skip
    return Effect.from_row(found)


def park(d: Dialect, scope: Scope, run_id: str, token: int, interrupt: NewInterrupt, state_json: str) -> Op[None]:
    i = interrupt
    parked: list[EventSpec] = [
        ("interrupt.created", {"interrupt_id": i.id, "kind": i.kind, "step": i.step}),
        ("checkpoint.created", {"step": i.step, "pending": [i.id]}),
        ("run.state.changed", {"status": "waiting", "interrupt_id": i.id}),
    ]
    sets = {"status": "waiting", "lease_owner": None, "lease_expires": None}
    yield from update_run(d, run_id, token, sets, parked, (state_json, i.step, [i.id]))
    yield none(
        "INSERT INTO run_interrupts (id, run_id, tenant, project, step, visit, ordinal, kind, prompt, schema, "
        "status, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
        i.id, run_id, scope.tenant, scope.project, i.step, i.visit, i.ordinal, i.kind, i.prompt,
        dumps(i.schema) if i.schema is not None else None, i.expires_at, now(),
    )  # fmt: skip
    yield from webhooks.settled(d, run_id, "waiting")  # after the interrupt: the summary sent names it


#: The scope a run queue claims in: one tenant/project (a ``CoreRunStore``), or None for every one.
QueueScope = TypeVar("QueueScope", bound=Scope | None, covariant=True)


class CoreRunQueue(Scoped[QueueScope]):
    """The ``RunQueue`` of the runs a claimer serves: claims, readiness, takeover, reaping, and the leases
    workers hold (renew, release, cancel requests: by run id and token, so in every scope).

    ``scope`` None is every tenant/project of the store (``StoreBackend.queue()``, through which every
    worker claims, so ``limits`` count the whole store); ``CoreRunStore`` is this queue for its own scope."""

    holders = scoped(claims.holders)
    take_over = scoped(reap.take_over, "write")
    needs_reaping = scoped(has_reapable)
    reap = scoped(reap.reap, "write")
    renew = unscoped(renew, "write")
    release = unscoped(release, "write")

    async def next_ready(self, workflows: Sequence[str], *, limits: Limits | None = None) -> float | None:
        return await self.ex.read(claims.next_ready, self.scope, workflows, limits or {})

    async def claim(
        self,
        owner: str,
        lease_s: float,
        limit: int,
        workflows: Sequence[str],
        *,
        holder: Holder | None = None,
        limits: Limits | None = None,
    ) -> list[Claim]:
        order = ClaimOrder(owner, lease_s, limit, workflows, holder, limits)
        found = await self.ex.write(claims.claim, self.scope, order, small=limit <= SMALL_ROWS)
        return [Claim.from_row(row) for row in found]

    async def cancel_requests(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        return await self.ex.read(cancel_requests, run_ids) if run_ids else {}


class CoreRunStore(CoreRunQueue[Scope]):
    """Runs, events, checkpoints, leases, effects and interrupts of one tenant/project."""

    create = scoped(create, "write")
    get = scoped(get)
    by_idempotency_key = scoped(by_idempotency_key)
    page = scoped(page)
    ids = scoped(run_ids)
    events = scoped(events)
    checkpoints = scoped(checkpoints)
    interrupts = scoped(interrupts)
    effects = scoped(effects)
    cancel = scoped(cancel, "write")
    decide = scoped(decisions.decide, "write")
    settle_effect = scoped(decisions.settle_effect, "write")
    note = scoped(note, "write")
    visit_effects = unscoped(visit_effects)
    record_effect = scoped(record_effect, "write")
    visit_interrupts = unscoped(visit_interrupts)
    park = scoped(park, "write")

    def __init__(self, ex: Executor, tenant: str, project: str) -> None:
        super().__init__(ex, Scope(tenant, project))

    async def commit(self, step: StepCommit) -> list[Claim]:
        found = await self._commit(step, small_commit(step.change, step.events, step.held))
        return [Claim.from_row(row) for row in found]

    async def _commit(self, step: StepCommit, small: bool) -> list[Row]:
        """``commit`` and its ``then_claim``'s claim in one transaction (a small one: SQLite may make it inline)."""
        return await self.ex.write(commit, self.scope, step, small=small)

    async def watch(
        self,
        changed: Callable[[Sequence[str]], None],
        *,
        task_status: TaskStatus[bool],
        cancelled: Callable[[Sequence[str]], None] | None = None,
        quiet_s: float = 5.0,
    ) -> None:
        """Where writes tell nobody (SQLite cannot hear another process's commit), the runtime polls
        (``POLL_S``, the workers' poll)."""
        task_status.started(False)
