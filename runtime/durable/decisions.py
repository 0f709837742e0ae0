"""Human decisions on a run: answering interrupts and settling ambiguous effects (one transaction each)."""

from __future__ import annotations

import sqlite3
from typing import Any, get_args

import jsonschema

from runtime.durable.models import loads
from runtime.errors import ConflictError, InvalidInputError, NotFoundError
from runtime.flow.workflow import Decision, DecisionAction
from runtime.ids import now
from runtime.store.sqlite.durable import EventSpec, Scope, dumps, plain_update, run_row

ACTIONS: tuple[str, ...] = get_args(DecisionAction)
OUTCOMES = ("applied", "not_applied")


def check_schema(value: Any, schema: dict[str, Any] | None, what: str) -> None:
    """Validate ``value`` against a JSON schema, with an error that says where and why."""
    if schema is None:
        return
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise InvalidInputError(f"{what} does not match its schema at {where}: {exc.message}") from None
    except jsonschema.SchemaError as exc:
        raise InvalidInputError(f"the schema for {what} is not a valid JSON schema: {exc.message}") from None


def checkpoint_dict(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "seq": row["seq"],
        "state": loads(row["state"]),
        "next_step": row["next_step"],
        "pending": loads(row["pending"]),
        "created_at": row["created_at"],
    }


def decide(
    conn: sqlite3.Connection, scope: Scope, interrupt_id: str, action: str, value: Any, reason: str | None, actor: str
) -> str:
    """Record a decision and queue the run to resume. Returns the run id."""
    if action not in ACTIONS:
        raise InvalidInputError(f"action {action!r} is not one of {list(ACTIONS)}")
    row = conn.execute(
        "SELECT * FROM run_interrupts WHERE id = ? AND tenant = ? AND project = ?",
        (interrupt_id, scope.tenant, scope.project),
    ).fetchone()
    if row is None:
        raise NotFoundError(f"no interrupt {interrupt_id}; list pending ones with interrupt_list")
    if row["status"] != "pending":
        raise ConflictError(
            f"interrupt {interrupt_id} is already {row['status']}; only a pending interrupt can be decided"
        )
    if action in ("edit", "respond"):
        check_schema(value, loads(row["schema"]), f"the value of interrupt {interrupt_id}")
    decision = Decision(action=action, value=value, actor=actor, reason=reason)  # type: ignore[arg-type]
    try:
        decision_json = dumps(decision.model_dump())
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"value must be JSON-serialisable: {exc}") from None
    conn.execute(
        "UPDATE run_interrupts SET status = 'decided', decision = ?, decided_at = ? WHERE id = ?",
        (decision_json, now(), interrupt_id),
    )
    run_id = str(row["run_id"])
    events: list[EventSpec] = [("interrupt.decided", {"interrupt_id": interrupt_id, "action": action, "actor": actor})]
    still = conn.execute("SELECT COUNT(*) FROM run_interrupts WHERE run_id = ? AND status = 'pending'", (run_id,))
    run = run_row(conn, scope, run_id)
    if run["status"] == "waiting" and still.fetchone()[0] == 0:
        events.append(("run.state.changed", {"status": "queued", "reason": "interrupt decided"}))
        plain_update(conn, run_id, {"status": "queued", "next_at": now()}, events)
    else:
        plain_update(conn, run_id, {}, events)
    return run_id


def settle_effect(conn: sqlite3.Connection, scope: Scope, effect_id: str, outcome: str, result: Any) -> str:
    """Resolve an ambiguous effect; requeue its run when nothing is left ambiguous. Returns the run id."""
    if outcome not in OUTCOMES:
        raise InvalidInputError(f"outcome {outcome!r} is not one of {list(OUTCOMES)}")
    row = conn.execute(
        "SELECT * FROM run_effects WHERE id = ? AND tenant = ? AND project = ?",
        (effect_id, scope.tenant, scope.project),
    ).fetchone()
    if row is None:
        raise NotFoundError(f"no effect {effect_id}; list ambiguous ones with effect_list")
    if row["status"] != "ambiguous":
        raise ConflictError(
            f"effect {effect_id} is {row['status']}, not ambiguous; only ambiguous effects are resolved"
        )
    try:
        result_json = dumps(result) if outcome == "applied" else None
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"result must be JSON-serialisable: {exc}") from None
    status = "succeeded" if outcome == "applied" else "prepared"
    conn.execute(
        "UPDATE run_effects SET status = ?, result = ?, error = NULL, updated_at = ? WHERE id = ?",
        (status, result_json, now(), effect_id),
    )
    run_id = str(row["run_id"])
    events: list[EventSpec] = [("effect.resolved", {"effect_id": effect_id, "outcome": outcome})]
    left = conn.execute("SELECT COUNT(*) FROM run_effects WHERE run_id = ? AND status = 'ambiguous'", (run_id,))
    run = run_row(conn, scope, run_id)
    if run["status"] == "needs_review" and left.fetchone()[0] == 0:
        events.append(("run.state.changed", {"status": "queued", "reason": "ambiguous effects resolved"}))
        plain_update(conn, run_id, {"status": "queued", "next_at": now(), "error": None}, events)
    else:
        plain_update(conn, run_id, {}, events)
    return run_id
