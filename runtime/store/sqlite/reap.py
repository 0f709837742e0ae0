"""Recovery of runs whose worker vanished, and timeouts of parked runs.

Only runs whose lease has *expired* are touched, inside the same transaction that takes the lease
away (the run leaves ``running``, so the old worker's token no longer matches anything): a call
whose worker still holds its lease is never reconciled. An effect caught ``dispatched`` is
settled by its class: idempotent ones go back to ``prepared`` (running them again is safe), a
non-idempotent one becomes ``ambiguous`` and its run ``needs_review`` until a human says whether
it was applied (``RunService.resolve_effect``). A step whose worker vanishes ``MAX_LOST_LEASES``
times in a row fails its run, so a step that kills its process cannot take down worker after worker
(a lease its worker gave up on shutdown, ``durable.RELEASED``, is handed on without counting).

``take_over`` applies the same rules at once to the runs of a holder process known to have ended
(prompt takeover, ``runtime.durable.owner``): its lease has not run out, but nobody will renew it.
"""

from __future__ import annotations

import sqlite3

from runtime.durable.store import EventSpec
from runtime.durable.store_shared import Scope, lost_worker_change, scope_args
from runtime.ids import now
from runtime.store.sqlite.durable import IN_SCOPE, RELEASED, end_unheld, plain_update


def reap(conn: sqlite3.Connection, scope: Scope | None) -> list[str]:
    """Requeue runs with expired leases, expire interrupts, time out runs past deadline (``None``: every scope)."""
    touched = _expired_leases(conn, scope)
    touched += _expired_interrupts(conn, scope)
    touched += _past_deadline(conn, scope)
    return touched


LOST_COLUMNS = "id, lease_owner, lease_token, lease_expires, cancel_requested, cancel_reason, step, lost_leases"


def _expired_leases(conn: sqlite3.Connection, scope: Scope | None) -> list[str]:
    rows = conn.execute(
        f"SELECT {LOST_COLUMNS} FROM runs WHERE status = 'running' AND lease_expires < ? AND {IN_SCOPE}",
        (now(), *scope_args(scope)),
    ).fetchall()
    return [_requeue_lost(conn, row, "lease.expired", "lease expired") for row in rows]


def take_over(conn: sqlite3.Connection, scope: Scope | None, host: str, pid: int, started: int) -> list[str]:
    """Requeue the running runs the ended process (``host``, ``pid``, ``started``) held, as for an expired lease
    (``None``: in every scope)."""
    rows = conn.execute(
        f"SELECT {LOST_COLUMNS} FROM runs WHERE status = 'running' AND lease_host = ? AND lease_pid = ? "
        f"AND lease_started = ? AND {IN_SCOPE}",
        (host, pid, started, *scope_args(scope)),
    ).fetchall()
    return [_requeue_lost(conn, row, "lease.taken_over", "its worker's process ended") for row in rows]


def _requeue_lost(conn: sqlite3.Connection, row: sqlite3.Row, event: str, reason: str) -> str:
    """The run of a worker that is gone leaves ``running``: queued again, or cancelled, needing review, failed."""
    run_id, at = row["id"], now()
    events: list[EventSpec] = [(event, {"worker": row["lease_owner"], "token": row["lease_token"]})]
    ambiguous = settle_in_flight(conn, run_id, events)
    lost = row["lost_leases"] + (0 if row["lease_expires"] == RELEASED else 1)
    sets = lost_worker_change(row, ambiguous, lost, at)
    events.append(("run.state.changed", {"status": sets["status"], "reason": reason}))
    plain_update(conn, run_id, sets, events)
    return str(run_id)


def settle_in_flight(conn: sqlite3.Connection, run_id: str, events: list[EventSpec]) -> list[str]:
    """Mark dispatched effects of a run: non-idempotent ones ambiguous, others prepared. Returns ambiguous ids."""
    at = now()
    ambiguous: list[str] = []
    for eff in conn.execute(
        "SELECT id, key, effect_class FROM run_effects WHERE run_id = ? AND status = 'dispatched'", (run_id,)
    ).fetchall():
        if eff["effect_class"] == "non_idempotent":
            ambiguous.append(eff["id"])
            conn.execute("UPDATE run_effects SET status = 'ambiguous', updated_at = ? WHERE id = ?", (at, eff["id"]))
            events.append(("effect.ambiguous", {"effect_id": eff["id"], "key": eff["key"]}))
        else:
            conn.execute("UPDATE run_effects SET status = 'prepared', updated_at = ? WHERE id = ?", (at, eff["id"]))
    return ambiguous


def _expired_interrupts(conn: sqlite3.Connection, scope: Scope | None) -> list[str]:
    rows = conn.execute(
        f"SELECT run_id, MIN(id) FROM run_interrupts WHERE status = 'pending' AND expires_at < ? AND {IN_SCOPE} "
        "GROUP BY run_id",
        (now(), *scope_args(scope)),
    ).fetchall()
    for run_id, interrupt_id in rows:
        end_unheld(
            conn, run_id, "timed_out", "interrupt expired", {"error": f"interrupt {interrupt_id} expired undecided"}
        )
    return [r[0] for r in rows]


def _past_deadline(conn: sqlite3.Connection, scope: Scope | None) -> list[str]:
    rows = conn.execute(
        f"SELECT id FROM runs WHERE status IN ('queued', 'waiting', 'needs_review') AND deadline < ? AND {IN_SCOPE}",
        (now(), *scope_args(scope)),
    ).fetchall()
    for row in rows:
        end_unheld(conn, row[0], "timed_out", "deadline passed", {"error": "the run's deadline passed"})
    return [r[0] for r in rows]
