"""Recovery of runs whose worker vanished, and timeouts of parked runs.

Only runs whose lease has *expired* are touched, inside the same transaction that takes the lease
away (the run leaves ``running``, so the old worker's token no longer matches anything): a call
whose worker still holds its lease is never reconciled. An effect caught ``dispatched`` is
settled by its class: idempotent ones go back to ``prepared`` (running them again is safe), a
non-idempotent one becomes ``ambiguous`` and its run ``needs_review`` until a human says whether
it was applied (``RunService.resolve_effect``). A step whose worker vanishes ``MAX_LOST_LEASES``
times in a row fails its run, so a step that kills its process cannot take down worker after worker
(a lease its worker gave up on shutdown, ``run_rows.RELEASED``, is handed on without counting).

Where several processes reap at once (PostgreSQL), every candidate row is taken with the dialect's
``skip_locked`` and its condition re-checked under the lock: a run is reaped once, and a run someone
else is changing right now is left for the next round. (SQLite serializes writers: nothing to skip.)

``take_over`` applies the same rules at once to the runs of a holder process known to have ended
(prompt takeover, ``runtime.durable.owner``): its lease has not run out, but nobody will renew it.
Each returns the runs it changed.
"""

from __future__ import annotations

from runtime.durable.store import EventSpec
from runtime.durable.store_shared import Scope, lost_worker_change, scope_args
from runtime.ids import now
from runtime.store.core.claims import sweep
from runtime.store.core.dialect import Dialect
from runtime.store.core.run_rows import IN_SCOPE, RELEASED, end_unheld, update_run
from runtime.store.core.statements import Op, Row, rows

LOST_COLUMNS = "id, lease_owner, lease_token, lease_expires, cancel_requested, cancel_reason, step, lost_leases"


def reap(d: Dialect, scope: Scope | None) -> Op[list[str]]:
    """Requeue runs with expired leases, expire interrupts, time out runs past deadline (``None``: every scope,
    and the scopes left with no queued run leave the fair queue's list, ``claims.sweep``)."""
    touched = yield from _expired_leases(d, scope)
    touched += yield from _expired_interrupts(d, scope)
    touched += yield from _past_deadline(d, scope)
    if scope is None:
        yield from sweep(d)
    return touched


def _expired_leases(d: Dialect, scope: Scope | None) -> Op[list[str]]:
    found = yield rows(
        f"SELECT {LOST_COLUMNS} FROM runs WHERE status = 'running' AND lease_expires < ? AND {IN_SCOPE} "
        f"ORDER BY id{d.skip_locked}",
        now(), *scope_args(scope),
    )  # fmt: skip
    return (yield from _requeue_all(d, found, "lease.expired", "lease expired"))


def take_over(d: Dialect, scope: Scope | None, host: str, pid: int, started: int) -> Op[list[str]]:
    """Requeue the running runs the ended process (``host``, ``pid``, ``started``) held, as for an expired lease
    (each row locked, skipping any another taker or reaper holds right now; ``None``: in every scope)."""
    found = yield rows(
        f"SELECT {LOST_COLUMNS} FROM runs WHERE status = 'running' AND lease_host = ? AND lease_pid = ? "
        f"AND lease_started = ? AND {IN_SCOPE} ORDER BY id{d.skip_locked}",
        host, pid, started, *scope_args(scope),
    )  # fmt: skip
    return (yield from _requeue_all(d, found, "lease.taken_over", "its worker's process ended"))


def _requeue_all(d: Dialect, found: list[Row], event: str, reason: str) -> Op[list[str]]:
    touched = []
    for row in found:
        touched.append((yield from _requeue_lost(d, row, event, reason)))
    return touched


def _requeue_lost(d: Dialect, row: Row, event: str, reason: str) -> Op[str]:
    """The run of a worker that is gone leaves ``running``: queued again, or cancelled, needing review, failed."""
    run_id, at = row["id"], now()
    events: list[EventSpec] = [(event, {"worker": row["lease_owner"], "token": row["lease_token"]})]
    ambiguous = yield from settle_in_flight(d, run_id, events)
    lost = row["lost_leases"] + (0 if row["lease_expires"] == RELEASED else 1)
    sets = lost_worker_change(row, ambiguous, lost, at)
    events.append(("run.state.changed", {"status": sets["status"], "reason": reason}))
    yield from update_run(d, run_id, None, sets, events)
    return str(run_id)


def settle_in_flight(d: Dialect, run_id: str, events: list[EventSpec]) -> Op[list[str]]:
    """Mark dispatched effects of a run (its row locked by the caller where writers run at once):
    non-idempotent ones ambiguous, others prepared. Returns the ambiguous ids, oldest first."""
    found = yield rows(
        "UPDATE run_effects SET status = CASE WHEN effect_class = 'non_idempotent' THEN 'ambiguous' "
        "ELSE 'prepared' END, updated_at = ? WHERE run_id = ? AND status = 'dispatched' "
        "RETURNING id, key, status, created_at",
        now(), run_id,
    )  # fmt: skip
    ambiguous = sorted((r for r in found if r["status"] == "ambiguous"), key=lambda r: (r["created_at"], r["id"]))
    events.extend(("effect.ambiguous", {"effect_id": r["id"], "key": r["key"]}) for r in ambiguous)
    return [r["id"] for r in ambiguous]


def _expired_interrupts(d: Dialect, scope: Scope | None) -> Op[list[str]]:
    at = now()
    locked = yield rows(
        "SELECT id FROM runs WHERE id IN (SELECT run_id FROM run_interrupts WHERE status = 'pending' "
        f"AND expires_at < ? AND {IN_SCOPE}) ORDER BY id{d.skip_locked}",
        at, *scope_args(scope),
    )  # fmt: skip
    if not locked:
        return []
    within, ids = d.in_list([r["id"] for r in locked])
    found = yield rows(  # re-read under the locks: a decision may have come first
        "SELECT run_id, MIN(id) AS first FROM run_interrupts WHERE status = 'pending' AND expires_at < ? "
        f"AND run_id{within} GROUP BY run_id ORDER BY run_id",
        at, *ids,
    )  # fmt: skip
    for row in found:
        error = f"interrupt {row['first']} expired undecided"
        yield from end_unheld(d, row["run_id"], "timed_out", "interrupt expired", {"error": error})
    return [r["run_id"] for r in found]


def _past_deadline(d: Dialect, scope: Scope | None) -> Op[list[str]]:
    found = yield rows(
        "SELECT id FROM runs WHERE status IN ('queued', 'waiting', 'needs_review') AND deadline < ? "
        f"AND {IN_SCOPE} ORDER BY id{d.skip_locked}",
        now(), *scope_args(scope),
    )  # fmt: skip
    for row in found:
        yield from end_unheld(d, row["id"], "timed_out", "deadline passed", {"error": "the run's deadline passed"})
    return [r["id"] for r in found]
