"""Checks on human decisions before they reach the store: actions, outcomes and JSON schemas."""

from __future__ import annotations

from typing import Any, get_args

from runtime.durable.models import Row, loads
from runtime.errors import InvalidInputError
from runtime.flow.workflow import DecisionAction

ACTIONS: tuple[str, ...] = get_args(DecisionAction)
OUTCOMES = ("applied", "not_applied")


def check_schema(value: Any, schema: dict[str, Any] | None, what: str) -> None:
    """Validate ``value`` against a JSON schema, with an error that says where and why."""
    if schema is None:
        return
    import jsonschema  # imported on first use: it costs ~50 ms of every cold start

    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise InvalidInputError(f"{what} does not match its schema at {where}: {exc.message}") from None
    except jsonschema.SchemaError as exc:
        raise InvalidInputError(f"the schema for {what} is not a valid JSON schema: {exc.message}") from None


def checkpoint_dict(row: Row) -> dict[str, Any]:
    """A checkpoint as ``RunService.checkpoints`` returns it, from its stored record. ``session_id``: the
    run's session at that point (its output session so far, else its input session)."""
    return {
        "seq": row["seq"],
        "state": loads(row["state"]),
        "next_step": row["next_step"],
        "pending": loads(row["pending"]),
        "session_id": row["session_id"],
        "created_at": row["created_at"],
    }
