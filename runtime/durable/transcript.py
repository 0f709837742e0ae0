"""What a run writes into its session so that the transcript reads as what happened.

A question a run asked a human and the human's decision become two chunks of the run's session:
the question as the run's own turn (``assistant``, named ``interrupt``) and the decision as the
human's (``user``, named ``decision``), with its action, value, actor and reason spelled out. They
are appended when the step that asked reads the decision, through the effect ledger (so a step
run again appends them once), on the run's output session so far, else its input session, else a
new session: the next step that writes to ``ctx.output_session_id`` goes on from there.
"""

from __future__ import annotations

import json
from typing import Any

from runtime.durable.models import Decision, Interrupt


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def decision_text(interrupt_id: str, decision: Decision) -> str:
    """One line a person can read: ``[decision int_… by alice] edit: the new text (reason: …)``."""
    text = f"[decision {interrupt_id} by {decision.actor}] {decision.action}"
    if decision.value is not None:
        text += f": {_value_text(decision.value)}"
    if decision.reason:
        text += f" (reason: {decision.reason})"
    return text


def decision_chunks(interrupt: Interrupt, decision: Decision) -> list[dict[str, Any]]:
    """The question and its decision as two chunks of the run's session."""
    question = f"[{interrupt.kind} {interrupt.id}] {interrupt.prompt}".rstrip()
    return [
        {"kind": "assistant", "name": "interrupt", "content": question},
        {"kind": "user", "name": "decision", "content": decision_text(interrupt.id, decision)},
    ]
