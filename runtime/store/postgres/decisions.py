"""Human decisions on a run in PostgreSQL: answering an interrupt, settling an ambiguous effect (one
transaction each). The run's row is locked before its interrupt or effect is read again and
changed (``durable``'s locking order), so a decision and the reaper never cross."""

from __future__ import annotations

import asyncpg

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
from runtime.store.postgres.durable import plain_update, run_row


async def _locked(conn: asyncpg.Connection, scope: Scope, table: str, row_id: str) -> asyncpg.Record | None:
    """The row of ``table`` (an interrupt or an effect) read again after locking its run; None if not in scope."""
    sql = f"SELECT run_id FROM {table} WHERE id = $1 AND tenant = $2 AND project = $3"
    run_id = await conn.fetchval(sql, row_id, scope.tenant, scope.project)
    if run_id is None:
        return None
    await run_row(conn, scope, run_id, lock=True)
    row: asyncpg.Record | None = await conn.fetchrow(f"SELECT * FROM {table} WHERE id = $1", row_id)
    return row


async def decide(
    conn: asyncpg.Connection, scope: Scope, interrupt_id: str, decision: Decision, check: CheckInterrupt
) -> str:
    """Record a decision and queue the run to resume. Returns the run id."""
    row = await _locked(conn, scope, "run_interrupts", interrupt_id)
    if row is None:
        raise no_interrupt(interrupt_id)
    if row["status"] != "pending":
        raise interrupt_not_pending(interrupt_id, row["status"])
    check(Interrupt.from_row(row))
    await conn.execute(
        "UPDATE run_interrupts SET status = 'decided', decision = $1, decided_at = $2 WHERE id = $3",
        decision_json(decision), now(), interrupt_id,
    )  # fmt: skip
    run_id = str(row["run_id"])
    data = {"interrupt_id": interrupt_id, "action": decision.action, "actor": decision.actor}
    events: list[EventSpec] = [("interrupt.decided", data)]
    still = await conn.fetchval("SELECT COUNT(*) FROM run_interrupts WHERE run_id = $1 AND status = 'pending'", run_id)
    run = await run_row(conn, scope, run_id)
    if run["status"] == "waiting" and still == 0:
        events.append(("run.state.changed", {"status": "queued", "reason": "interrupt decided"}))
        await plain_update(conn, run_id, {"status": "queued", "next_at": now()}, events)
    else:
        await plain_update(conn, run_id, {}, events)
    return run_id


async def settle_effect(
    conn: asyncpg.Connection, scope: Scope, effect_id: str, applied: bool, result_json: str | None
) -> str:
    """Resolve an ambiguous effect; requeue its run when nothing is left ambiguous. Returns the run id."""
    row = await _locked(conn, scope, "run_effects", effect_id)
    if row is None:
        raise no_effect(effect_id)
    if row["status"] != "ambiguous":
        raise effect_not_ambiguous(effect_id, row["status"])
    status = "succeeded" if applied else "prepared"
    await conn.execute(
        "UPDATE run_effects SET status = $1, result = $2, error = NULL, updated_at = $3 WHERE id = $4",
        status, result_json if applied else None, now(), effect_id,
    )  # fmt: skip
    run_id = str(row["run_id"])
    outcome = "applied" if applied else "not_applied"
    events: list[EventSpec] = [("effect.resolved", {"effect_id": effect_id, "outcome": outcome})]
    left = await conn.fetchval("SELECT COUNT(*) FROM run_effects WHERE run_id = $1 AND status = 'ambiguous'", run_id)
    run = await run_row(conn, scope, run_id)
    if run["status"] == "needs_review" and left == 0:
        events.append(("run.state.changed", {"status": "queued", "reason": "ambiguous effects resolved"}))
        await plain_update(conn, run_id, {"status": "queued", "next_at": now(), "error": None}, events)
    else:
        await plain_update(conn, run_id, {}, events)
    return run_id
