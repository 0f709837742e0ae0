"""Interrupts as elicitation forms, and the human's answer back as an interrupt decision.

An elicitation form may only hold flat primitive fields (the spec's ``PrimitiveSchemaDefinition``),
so each interrupt kind gets a small form: approval asks approve/reject, review adds edit and a
value, input asks for the value (the interrupt's own schema when it is already a flat form).
The answer maps back to the ``{action, value, reason}`` the runtime records as the decision.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult

from runtime.durable.models import Interrupt

PRIMITIVE_TYPES = frozenset({"string", "number", "integer", "boolean"})
REASON = {"type": "string", "title": "Reason", "description": "optional: why (kept with the decision)"}


@dataclass(frozen=True)
class Answer:
    """A human's decision on one interrupt, ready for ``rt.runs.resolve_interrupt``."""

    action: str
    value: Any = None
    reason: str | None = None


def is_flat_form(schema: dict[str, Any] | None) -> bool:
    """Whether a JSON schema is already a valid elicitation form (an object of primitive fields)."""
    if not schema or schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        return False
    props: dict[str, Any] = schema["properties"]
    return bool(props) and all(isinstance(p, dict) and p.get("type") in PRIMITIVE_TYPES for p in props.values())


def form_for(interrupt: Interrupt) -> dict[str, Any]:
    """The elicitation ``requestedSchema`` asking a human to decide ``interrupt``."""
    schema = interrupt.schema_
    if interrupt.kind == "approval":
        choice = {"type": "string", "title": "Decision", "enum": ["approve", "reject"]}
        return {"type": "object", "properties": {"decision": choice, "reason": REASON}, "required": ["decision"]}
    if interrupt.kind == "input" and is_flat_form(schema):
        assert schema is not None
        return schema
    value = {"type": "string", "title": "Value", "description": _value_hint(schema)}
    if interrupt.kind == "input":
        return {"type": "object", "properties": {"value": value}, "required": ["value"]}
    choice = {"type": "string", "title": "Decision", "enum": ["approve", "edit", "reject"]}
    return {
        "type": "object",
        "properties": {"decision": choice, "value": value, "reason": REASON},
        "required": ["decision"],
    }


def _value_hint(schema: dict[str, Any] | None) -> str:
    if schema is None or schema.get("type") == "string":
        return "your answer"
    return f"JSON matching {json.dumps(schema, separators=(',', ':'))}"


def message_for(interrupt: Interrupt) -> str:
    """The text shown above the form."""
    head = {"approval": "Approval needed", "input": "Input needed", "review": "Review needed"}[interrupt.kind]
    prompt = interrupt.prompt or "(no prompt given)"
    return f"{head} for run {interrupt.run_id} (step {interrupt.step}): {prompt}"


def request_for(interrupt: Interrupt) -> ElicitRequest:
    """The elicitation request (embedded in an ``InputRequiredResult`` on 2026-07-28)."""
    return ElicitRequest(
        params=ElicitRequestFormParams(message=message_for(interrupt), requested_schema=form_for(interrupt))
    )


def answer_from(interrupt: Interrupt, result: ElicitResult) -> Answer | None:
    """The decision a form answer stands for; ``None`` when the human dismissed it (stays pending).

    Declining the form is a "no": the interrupt is rejected, the run goes on with that answer.
    """
    if result.action == "cancel":
        return None
    if result.action == "decline":
        return Answer("reject", reason="declined in the client")
    content: dict[str, Any] = dict(result.content or {})
    reason = content.get("reason") or None
    if interrupt.kind == "input":
        if is_flat_form(interrupt.schema_):
            return Answer("respond", content)
        return Answer("respond", _parse_value(content.get("value"), interrupt.schema_))
    decision = str(content.get("decision") or "approve")
    if decision == "edit":
        return Answer("edit", _parse_value(content.get("value"), interrupt.schema_), reason)
    return Answer(decision, None, reason)


def _parse_value(raw: Any, schema: dict[str, Any] | None) -> Any:
    """A text field's value as the JSON the interrupt's schema expects (plain text when it expects a string)."""
    if not isinstance(raw, str) or schema is None or schema.get("type") == "string":
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw  # the runtime validates against the schema and says what is wrong
