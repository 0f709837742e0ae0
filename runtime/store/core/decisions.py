"""Human decisions on a run: answering an interrupt, settling an ambiguous effect (one transaction each).

Where writers run at once (``Dialect.for_update``), the run's row is locked before its interrupt or
effect is read again and changed (``run_rows``' locking order), so a decision and the reaper never cross.
Each returns the run it changed (the PostgreSQL backend announces it).
"""

from __future__ import annotations

from runtime.durable.models import Decision, Interrupt
from runtime.durable.store import CheckInterrupt, EventSpec
from runtime.durable.store_shared import (
    Scope,
    decision_json,
    effect_not_ambiguous,
    interrupt_not_pending,
    no_effect,
    no_interrupt,
)
from runtime.ids import now
from runtime.store.core.dialect import Dialect
from runtime.store.core.run_rows import run_row, update_run
from runtime.store.core.statements import Op, Row, none, one, value


def _in_scope(d: Dialect, scope: Scope, table: str, row_id: str) -> Op[Row | None]:
    """The row of ``table`` (an interrupt or an effect) in ``scope``, read again under its run's lock where
    writers run at once; None if not in scope."""
    sql = f"SELECT * FROM {table} WHERE id = ? AND tenant = ? AND project = ?"
    row = yield one(sql, row_id, scope.tenant, scope.project)
    if row is None or not d.for_update:
        return row
    yield from run_row(d, scope, row["run_id"], lock=True)
    return (yield one(f"SELECT * FROM {table} WHERE id = ?", row_id))


def decide(d: Dialect, scope: Scope, interrupt_id: str, decision: Decision, check: CheckInterrupt) -> Op[str]:
    """Record a decision and queue the run to resume. Returns the run id."""
    row = yield from _in_scope(d, scope, "run_interrupts", interrupt_id)
    if row is None:
        raise no_interrupt(interrupt_id)
    if row["status"] != "pending":
        raise interrupt_not_pending(interrupt_id, row["status"])
    check(Interrupt.from_row(row))
    yield none(
        "UPDATE run_interrupts SET status = 'decided', decision = ?, decided_at = ? WHERE id = ?",
        decision_json(decision), now(), interrupt_id,
    )  # fmt: skip
    run_id = str(row["run_id"])
    data = {"interrupt_id": interrupt_id, "action": decision.action, "actor": decision.actor}
    events: list[EventSpec] = [("interrupt.decided", data)]
    still = yield value("SELECT COUNT(*) FROM run_interrupts WHERE run_id = ? AND status = 'pending'", run_id)
    run = yield from run_row(d, scope, run_id)
    if run["status"] == "waiting" and still == 0:
        events.append(("run.state.changed", {"status": "queued", "reason": "interrupt decided"}))
        yield from update_run(d, run_id, None, {"status": "queued", "next_at": now()}, events)
    else:
        yield from update_run(d, run_id, None, {}, events)
    return run_id


def settle_effect(d: Dialect, scope: Scope, effect_id: str, applied: bool, result_json: str | None) -> Op[str]:
    """Resolve an ambiguous effect; requeue its run when nothing is left ambiguous. Returns the run id."""
    row = yield from _in_scope(d, scope, "run_effects", effect_id)
    if row is None:
        raise no_effect(effect_id)
    if row["status"] != "ambiguous":
        raise effect_not_ambiguous(effect_id, row["status"])
    status = "succeeded" if applied else "prepared"
    yield none(
        "UPDATE run_effects SET status = ?, result = ?, error = NULL, updated_at = ? WHERE id = ?",
        status, result_json if applied else None, now(), effect_id,
    )  # fmt: skip
    run_id = str(row["run_id"])
    outcome = "applied" if applied else "not_applied"
    events: list[EventSpec] = [("effect.resolved", {"effect_id": effect_id, "outcome": outcome})]
    left = yield value("SELECT COUNT(*) FROM run_effects WHERE run_id = ? AND status = 'ambiguous'", run_id)
    run = yield from run_row(d, scope, run_id)
    if run["status"] == "needs_review" and left == 0:
        events.append(("run.state.changed", {"status": "queued", "reason": "ambiguous effects resolved"}))
        yield from update_run(d, run_id, None, {"status": "queued", "next_at": now(), "error": None}, events)
    else:
        yield from update_run(d, run_id, None, {}, events)
    return run_id
