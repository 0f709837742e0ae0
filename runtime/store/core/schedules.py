"""Schedules and their ticks, written once for both backends.

A tick fires at most once, whatever the number of servers on the store and across restarts: ``fire``
inserts the key ``(schedule_id, tick)`` into ``schedule_ticks`` and, only where that insert took, creates
the tick's run, in the same transaction (the insert ignores an existing key, so a second firer's
transaction goes on and creates nothing). The schedule row is read first (``for_update``: a
concurrent firer on PostgreSQL waits for the first one's commit) and moved on to its next tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from runtime.durable.store import EventSpec, dumps
from runtime.durable.store_shared import Scope
from runtime.errors import NotFoundError
from runtime.ids import now
from runtime.schedules.store import Schedule, Tick
from runtime.store.core.dialect import Dialect
from runtime.store.core.run_rows import insert_run
from runtime.store.core.sessions import insert_one
from runtime.store.core.statements import Op, Row, Store, none, one, rows, unscoped
from runtime.store.core.tables.operations import SCHEDULES

COLUMNS = ", ".join(column.name for column in SCHEDULES.columns)  # as the table describes them


def _found(row: Row | None, schedule_id: str) -> Schedule:
    if row is None:
        raise NotFoundError(f"no schedule {schedule_id} here: schedule_list shows this project's schedules")
    return dict(row)


def create(d: Dialect, scope: Scope, fields: dict[str, Any]) -> Op[Schedule]:
    at = now()
    row = {"tenant": scope.tenant, "project": scope.project, "paused": 0, "created_at": at, "updated_at": at, **fields}
    row["input"] = dumps(fields.get("input") or {})
    yield none(f"INSERT INTO schedules ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", *row.values())
    return _found((yield one(f"SELECT {COLUMNS} FROM schedules WHERE id = ?", row["id"])), row["id"])


def get(d: Dialect, scope: Scope, schedule_id: str) -> Op[Schedule]:
    found = yield one(
        f"SELECT {COLUMNS} FROM schedules WHERE tenant = ? AND project = ? AND id = ?",
        scope.tenant, scope.project, schedule_id,
    )  # fmt: skip
    return _found(found, schedule_id)


def in_scope(d: Dialect, scope: Scope, limit: int) -> Op[list[Schedule]]:
    found = yield rows(
        f"SELECT {COLUMNS} FROM schedules WHERE tenant = ? AND project = ? ORDER BY id LIMIT ?",
        scope.tenant, scope.project, limit,
    )  # fmt: skip
    return [dict(row) for row in found]


def update(d: Dialect, scope: Scope, schedule_id: str, sets: dict[str, Any]) -> Op[Schedule]:
    assign = ", ".join(f"{column} = ?" for column in sets)
    changed = yield none(
        f"UPDATE schedules SET {assign}, updated_at = ? WHERE tenant = ? AND project = ? AND id = ?",
        *sets.values(), now(), scope.tenant, scope.project, schedule_id,
    )  # fmt: skip
    if not changed:
        _found(None, schedule_id)
    return (yield from get(d, scope, schedule_id))


def delete(d: Dialect, scope: Scope, schedule_id: str) -> Op[None]:
    gone = yield none(
        "DELETE FROM schedules WHERE tenant = ? AND project = ? AND id = ?", scope.tenant, scope.project, schedule_id
    )
    if not gone:
        _found(None, schedule_id)
    yield none("DELETE FROM schedule_ticks WHERE schedule_id = ?", schedule_id)


def due(d: Dialect, at: float, limit: int) -> Op[list[Schedule]]:
    """Schedules of every scope whose next tick is at or before ``at`` (not paused), earliest first."""
    found = yield rows(
        f"SELECT {COLUMNS} FROM schedules WHERE paused = 0 AND next_at <= ? ORDER BY next_at, id LIMIT ?", at, limit
    )
    return [dict(row) for row in found]


def fire(d: Dialect, schedule_id: str, expected: float, ticks: Sequence[Tick], next_at: float) -> Op[list[str]]:
    """Fire ``ticks`` of a schedule whose next tick is still ``expected`` (else another firer did: nothing),
    each a run unless its key is taken already, and move the schedule on to ``next_at``. The run ids made."""
    row = yield one(f"SELECT tenant, project, next_at, paused FROM schedules WHERE id = ?{d.for_update}", schedule_id)
    if row is None or row["paused"] or float(row["next_at"]) != expected:
        return []
    scope = Scope(row["tenant"], row["project"])
    made: list[str] = []
    for tick in ticks:
        taken = yield none(
            f"{d.insert_ignore} INTO schedule_ticks (schedule_id, tick, created_at) VALUES (?, ?, ?)"
            f"{d.on_conflict_ignore}",
            schedule_id, tick.at, now(),
        )  # fmt: skip
        if not taken:
            continue
        run = tick.run
        if tick.session is not None:
            session = yield from insert_one(d, (scope.tenant, scope.project), tick.session)
            run = replace(run, session_id=session.id)
        created: EventSpec = (
            "run.created",
            {
                "workflow": run.workflow,
                "plan_hash": run.plan_hash,
                "session_id": run.session_id,
                "schedule_id": schedule_id,
                "tick": tick.at,
            },
        )
        columns = {**run.columns(), "schedule_id": schedule_id}
        run_id = yield from insert_run(d, scope, columns, [created])
        yield none(
            "UPDATE schedule_ticks SET run_id = ? WHERE schedule_id = ? AND tick = ?", run_id, schedule_id, tick.at
        )
        made.append(run_id)
    last = max((t.at for t in ticks), default=None)
    yield none(
        "UPDATE schedules SET next_at = ?, last_tick = COALESCE(?, last_tick), updated_at = ? WHERE id = ?",
        next_at, last, now(), schedule_id,
    )  # fmt: skip
    return made


class CoreScheduleStore(Store):
    """Schedules of every tenant/project (each call names its scope); the ticker's reads span them all."""

    create = unscoped(create, "write")
    get = unscoped(get)
    in_scope = unscoped(in_scope)
    update = unscoped(update, "write")
    delete = unscoped(delete, "write")
    due = unscoped(due)
    fire = unscoped(fire, "write")
