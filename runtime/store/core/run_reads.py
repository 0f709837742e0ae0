"""The run store's reads (``RunStore``'s), written once: a run with its pending interrupts, pages of runs,
events, checkpoints, interrupts, effects. Each is one snapshot (``Executor.read``); a read of one run
checks first that the run is in the scope asked (``no_run`` otherwise)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.durable.models import Effect, Event, Interrupt, Run, checkpoint_dict
from runtime.durable.store_shared import Scope
from runtime.store.core.dialect import Dialect
from runtime.store.core.run_rows import EVENT_COLUMNS, run_row
from runtime.store.core.statements import Op, Row, rows, value


def with_pending(d: Dialect, found: Sequence[Row]) -> Op[list[Run]]:
    """Runs from their rows, each with its pending interrupts (oldest first), in one query for all."""
    ids = [row["id"] for row in found]
    pending: dict[str, list[Interrupt]] = {run_id: [] for run_id in ids}
    if ids:
        within, args = d.in_list(ids)
        sql = f"SELECT * FROM run_interrupts WHERE status = 'pending' AND run_id{within} ORDER BY created_at"
        for r in (yield rows(sql, *args)):
            pending[r["run_id"]].append(Interrupt.from_row(r))
    return [Run.from_row(row, tuple(pending[row["id"]])) for row in found]


def get(d: Dialect, scope: Scope, run_id: str) -> Op[Run]:
    row = yield from run_row(d, scope, run_id)
    return (yield from with_pending(d, [row]))[0]


def by_idempotency_key(d: Dialect, scope: Scope, key: str) -> Op[str | None]:
    sql = "SELECT id FROM runs WHERE tenant = ? AND project = ? AND idempotency_key = ?"
    found = yield value(sql, scope.tenant, scope.project, key)
    return None if found is None else str(found)


def page(
    d: Dialect, scope: Scope, status: str | None, workflow: str | None, before: str | None, limit: int
) -> Op[list[Run]]:
    sql = "SELECT * FROM runs WHERE tenant = ? AND project = ?"
    args: list[Any] = [scope.tenant, scope.project]
    for cond, arg in ((" AND status = ?", status), (" AND workflow = ?", workflow), (" AND id < ?", before)):
        if arg is not None:
            sql, args = sql + cond, [*args, arg]
    found = yield rows(sql + " ORDER BY id DESC LIMIT ?", *args, limit)
    return (yield from with_pending(d, found))


def events(d: Dialect, scope: Scope, run_id: str, after_seq: int, limit: int) -> Op[list[Event]]:
    yield from run_row(d, scope, run_id)
    sql = f"SELECT {EVENT_COLUMNS} FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"
    return [Event.from_row(r) for r in (yield rows(sql, run_id, after_seq, limit))]


def checkpoints(d: Dialect, scope: Scope, run_id: str) -> Op[list[dict[str, Any]]]:
    yield from run_row(d, scope, run_id)
    if d.arrays:  # kept in a table of their own where a commit is one statement (run_rows)
        sql = "SELECT * FROM run_checkpoints WHERE run_id = ? ORDER BY seq"
    else:  # on their event's row
        sql = (
            "SELECT seq, cp_state AS state, cp_next_step AS next_step, cp_pending AS pending, "
            "cp_session_id AS session_id, created_at FROM run_events "
            "WHERE run_id = ? AND cp_pending IS NOT NULL ORDER BY seq"
        )
    return [checkpoint_dict(r) for r in (yield rows(sql, run_id))]


def interrupts(d: Dialect, scope: Scope, run_id: str | None) -> Op[list[Interrupt]]:
    sql = "SELECT * FROM run_interrupts WHERE status = 'pending' AND tenant = ? AND project = ?"
    args: tuple[Any, ...] = (scope.tenant, scope.project)
    if run_id is not None:
        yield from run_row(d, scope, run_id)
        sql, args = sql + " AND run_id = ?", (*args, run_id)
    return [Interrupt.from_row(r) for r in (yield rows(sql + " ORDER BY created_at", *args))]


def effects(d: Dialect, scope: Scope, status: str | None, run_id: str | None) -> Op[list[Effect]]:
    sql = "SELECT * FROM run_effects WHERE tenant = ? AND project = ?"
    args: list[Any] = [scope.tenant, scope.project]
    for cond, arg in ((" AND status = ?", status), (" AND run_id = ?", run_id)):
        if arg is not None:
            sql, args = sql + cond, [*args, arg]
    return [Effect.from_row(r) for r in (yield rows(sql + " ORDER BY created_at, id", *args))]


def visit_effects(d: Dialect, run_id: str, visit: int) -> Op[list[Effect]]:
    found = yield rows(
        "SELECT * FROM run_effects WHERE run_id = ? AND visit = ? ORDER BY created_at, id", run_id, visit
    )
    return [Effect.from_row(r) for r in found]


def visit_interrupts(d: Dialect, run_id: str, visit: int) -> Op[dict[int, Interrupt]]:
    found = yield rows("SELECT * FROM run_interrupts WHERE run_id = ? AND visit = ?", run_id, visit)
    return {r["ordinal"]: Interrupt.from_row(r) for r in found}


def cancel_requests(d: Dialect, run_ids: Sequence[str]) -> Op[dict[str, str | None]]:
    if not run_ids:
        return {}
    within, args = d.in_list(run_ids)
    found = yield rows(f"SELECT id, cancel_reason FROM runs WHERE cancel_requested = 1 AND id{within}", *args)
    return {row["id"]: row["cancel_reason"] for row in found}
