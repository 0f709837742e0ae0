"""Human decisions on a run in SQLite: answering an interrupt, settling an ambiguous effect (one transaction each)."""

from __future__ import annotations

import sqlite3

from runtime.durable.models import Interrupt
from runtime.durable.store import CheckInterrupt, EventSpec
from runtime.durable.store_shared import (
    Scope,
    decision_json,
    effect_not_ambiguous,
    interrupt_not_pending,
    no_effect,
    no_interrupt,
)
from runtime.flow.workflow import Decision
from runtime.ids import now
from runtime.store.sqlite.durable import plain_update, run_row


def decide(conn: sqlite3.Connection, scope: Scope, interrupt_id: str, decision: Decision, check: CheckInterrupt) -> str:
    """Record a decision and queue the run to resume. Returns the run id."""
    row = conn.execute(
        "SELECT * FROM run_interrupts WHERE id = ? AND tenant = ? AND project = ?",
        (interrupt_id, scope.tenant, scope.project),
    ).fetchone()
    if row is None:
        raise no_interrupt(interrupt_id)
    if row["status"] != "pending":
        raise interrupt_not_pending(interrupt_id, row["status"])
    check(Interrupt.from_row(row))
    conn.execute(
        "UPDATE run_interrupts SET status = 'decided', decision = ?, decided_at = ? WHERE id = ?",
        (decision_json(decision), now(), interrupt_id),
    )
    run_id = str(row["run_id"])
    data = {"interrupt_id": interrupt_id, "action": decision.action, "actor": decision.actor}
    events: list[EventSpec] = [("interrupt.decided", data)]
    still = conn.execute("SELECT COUNT(*) FROM run_interrupts WHERE run_id = ? AND status = 'pending'", (run_id,))
    run = run_row(conn, scope, run_id)
    if run["status"] == "waiting" and still.fetchone()[0] == 0:
        events.append(("run.state.changed", {"status": "queued", "reason": "interrupt decided"}))
        plain_update(conn, run_id, {"status": "queued", "next_at": now()}, events)
    else:
        plain_update(conn, run_id, {}, events)
    return run_id


def settle_effect(
    conn: sqlite3.Connection, scope: Scope, effect_id: str, applied: bool, result_json: str | None
) -> str:
    """Resolve an ambiguous effect; requeue its run when nothing is left ambiguous. Returns the run id."""
    row = conn.execute(
        "SELECT * FROM run_effects WHERE id = ? AND tenant = ? AND project = ?",
        (effect_id, scope.tenant, scope.project),
    ).fetchone()
    if row is None:
        raise no_effect(effect_id)
    if row["status"] != "ambiguous":
        raise effect_not_ambiguous(effect_id, row["status"])
    status = "succeeded" if applied else "prepared"
    conn.execute(
        "UPDATE run_effects SET status = ?, result = ?, error = NULL, updated_at = ? WHERE id = ?",
        (status, result_json if applied else None, now(), effect_id),
    )
    run_id = str(row["run_id"])
    outcome = "applied" if applied else "not_applied"
    events: list[EventSpec] = [("effect.resolved", {"effect_id": effect_id, "outcome": outcome})]
    left = conn.execute("SELECT COUNT(*) FROM run_effects WHERE run_id = ? AND status = 'ambiguous'", (run_id,))
    run = run_row(conn, scope, run_id)
    if run["status"] == "needs_review" and left.fetchone()[0] == 0:
        events.append(("run.state.changed", {"status": "queued", "reason": "ambiguous effects resolved"}))
        plain_update(conn, run_id, {"status": "queued", "next_at": now(), "error": None}, events)
    else:
        plain_update(conn, run_id, {}, events)
    return run_id
