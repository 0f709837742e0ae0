"""JSON schema checks: a run's input against its workflow's ``input_schema``, a decided value against its
interrupt's ``schema``, with errors that say where the value is wrong and why."""

from __future__ import annotations

from typing import Any

from runtime.errors import InvalidInputError


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
