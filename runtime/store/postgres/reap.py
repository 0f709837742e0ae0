"""Recovery of runs whose worker vanished, and timeouts of parked runs, on PostgreSQL.

The rules are the SQLite backend's (``runtime/store/sqlite/reap.py``): only runs whose lease has
*expired* are touched, in the transaction that takes the lease away; a dispatched non-idempotent
effect becomes ambiguous and its run ``needs_review``; a step losing its worker ``MAX_LOST_LEASES``
times fails its run. Here several processes reap at once, so every candidate row is taken with
``FOR UPDATE SKIP LOCKED`` and its condition re-checked under the lock: a run is reaped once, and a
run someone else is changing right now is left for the next round. ``take_over`` applies the same
rules at once to the runs of a holder process known to have ended (``runtime.durable.owner``).
"""

from __future__ import annotations

import asyncpg

from runtime.durable.store import EventSpec
from runtime.durable.store_shared import Scope, lost_worker_change, scope_args
from runtime.ids import now
from runtime.store.postgres.durable import RELEASED, end_unheld, plain_update


async def reap(conn: asyncpg.Connection, scope: Scope | None) -> list[str]:
    """Requeue runs with expired leases, expire interrupts, time out runs past their deadline."""
    touched = await _expired_leases(conn, scope)
    touched += await _expired_interrupts(conn, scope)
    touched += await _past_deadline(conn, scope)
    return touched


LOST_COLUMNS = "id, lease_owner, lease_token, lease_expires, cancel_requested, cancel_reason, step, lost_leases"


async def _expired_leases(conn: asyncpg.Connection, scope: Scope | None) -> list[str]:
    rows = await conn.fetch(
        f"SELECT {LOST_COLUMNS} FROM runs WHERE status = 'running' AND lease_expires < $1 "
        "AND tenant = COALESCE($2, tenant) AND project = COALESCE($3, project) ORDER BY id FOR UPDATE SKIP LOCKED",
        now(), *scope_args(scope),
    )  # fmt: skip
    return [await _requeue_lost(conn, row, "lease.expired", "lease expired") for row in rows]


async def take_over(conn: asyncpg.Connection, scope: Scope | None, host: str, pid: int, started: int) -> list[str]:
    """Requeue the running runs the ended process (``host``, ``pid``, ``started``) held, as for an expired lease
    (each row locked, skipping any another taker or reaper holds right now; ``None``: in every scope)."""
    rows = await conn.fetch(
        f"SELECT {LOST_COLUMNS} FROM runs WHERE status = 'running' AND lease_host = $1 AND lease_pid = $2 "
        "AND lease_started = $3 AND tenant = COALESCE($4, tenant) AND project = COALESCE($5, project) "
        "ORDER BY id FOR UPDATE SKIP LOCKED",
        host, pid, started, *scope_args(scope),
    )  # fmt: skip
    return [await _requeue_lost(conn, row, "lease.taken_over", "its worker's process ended") for row in rows]


async def _requeue_lost(conn: asyncpg.Connection, row: asyncpg.Record, event: str, reason: str) -> str:
    """The run of a worker that is gone leaves ``running``: queued again, or cancelled, needing review, failed."""
    run_id, at = row["id"], now()
    events: list[EventSpec] = [(event, {"worker": row["lease_owner"], "token": row["lease_token"]})]
    ambiguous = await settle_in_flight(conn, run_id, events)
    lost = row["lost_leases"] + (0 if row["lease_expires"] == RELEASED else 1)
    sets = lost_worker_change(row, ambiguous, lost, at)
    events.append(("run.state.changed", {"status": sets["status"], "reason": reason}))
    await plain_update(conn, run_id, sets, events)
    return str(run_id)


async def settle_in_flight(conn: asyncpg.Connection, run_id: str, events: list[EventSpec]) -> list[str]:
    """Mark dispatched effects of a run (its row locked by the caller): non-idempotent ones ambiguous,
    others prepared. Returns the ambiguous ids."""
    rows = await conn.fetch(
        "UPDATE run_effects SET status = CASE WHEN effect_class = 'non_idempotent' THEN 'ambiguous' "
        "ELSE 'prepared' END, updated_at = $2 WHERE run_id = $1 AND status = 'dispatched' "
        "RETURNING id, key, status, created_at",
        run_id, now(),
    )  # fmt: skip
    ambiguous = sorted((r for r in rows if r["status"] == "ambiguous"), key=lambda r: (r["created_at"], r["id"]))
    events.extend(("effect.ambiguous", {"effect_id": r["id"], "key": r["key"]}) for r in ambiguous)
    return [r["id"] for r in ambiguous]


async def _expired_interrupts(conn: asyncpg.Connection, scope: Scope | None) -> list[str]:
    at = now()
    locked = await conn.fetch(
        "SELECT id FROM runs WHERE id IN (SELECT run_id FROM run_interrupts WHERE status = 'pending' "
        "AND expires_at < $1 AND tenant = COALESCE($2, tenant) AND project = COALESCE($3, project)) "
        "ORDER BY id FOR UPDATE SKIP LOCKED",
        at, *scope_args(scope),
    )  # fmt: skip
    if not locked:
        return []
    rows = await conn.fetch(  # re-read under the locks: a decision may have come first
        "SELECT run_id, MIN(id) AS first FROM run_interrupts WHERE status = 'pending' AND expires_at < $1 "
        "AND run_id = ANY($2::text[]) GROUP BY run_id ORDER BY run_id",
        at, [r["id"] for r in locked],
    )  # fmt: skip
    for row in rows:
        error = f"interrupt {row['first']} expired undecided"
        await end_unheld(conn, row["run_id"], "timed_out", "interrupt expired", {"error": error})
    return [r["run_id"] for r in rows]


async def _past_deadline(conn: asyncpg.Connection, scope: Scope | None) -> list[str]:
    rows = await conn.fetch(
        "SELECT id FROM runs WHERE status IN ('queued', 'waiting', 'needs_review') AND deadline < $1 "
        "AND tenant = COALESCE($2, tenant) AND project = COALESCE($3, project) ORDER BY id FOR UPDATE SKIP LOCKED",
        now(), *scope_args(scope),
    )  # fmt: skip
    for row in rows:
        await end_unheld(conn, row["id"], "timed_out", "deadline passed", {"error": "the run's deadline passed"})
    return [r["id"] for r in rows]
