"""Records of the durable layer as users see them: ``Run``, ``Event``, ``Interrupt``, ``Effect``, ``Decision``.

They are what the ``RunStore`` protocol (``store.py``) speaks, so they live below both the stores and the
workflow definitions: ``runtime.flow.workflow`` re-exports ``Decision`` and the literal types it names.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field

InterruptKind = Literal["approval", "input", "review"]
DecisionAction = Literal["approve", "edit", "reject", "respond"]
ACTIONS: tuple[str, ...] = get_args(DecisionAction)
OUTCOMES = ("applied", "not_applied")
"""How a person settles an ambiguous effect (``RunService.resolve_effect``)."""

RunStatus = Literal["queued", "running", "waiting", "succeeded", "failed", "cancelled", "timed_out", "needs_review"]
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "timed_out"})
SETTLED: frozenset[str] = TERMINAL | {"waiting", "needs_review"}
"""Statuses in which a run will not move without outside help (``wait`` returns on these)."""

InterruptStatus = Literal["pending", "decided", "expired"]
EffectStatus = Literal["prepared", "dispatched", "succeeded", "failed", "ambiguous"]


class Row(Protocol):
    """A stored record read by column name (a ``sqlite3.Row``, an ``asyncpg.Record``, a dict)."""

    def __getitem__(self, key: str, /) -> Any: ...


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def trace_id_of(trace_context: str | None) -> str | None:
    """The trace id in a stored trace context (JSON holding a W3C ``traceparent``: ``00-TRACE-SPAN-FLAGS``)."""
    if not trace_context:
        return None
    parent = json.loads(trace_context).get("traceparent", "")
    parts = parent.split("-") if isinstance(parent, str) else []
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True)


class Decision(BaseModel):
    """A human's answer to an interrupt."""

    model_config = ConfigDict(frozen=True)

    action: DecisionAction
    value: Any = None
    actor: str = "user"
    reason: str | None = None


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


class Interrupt(_Record):
    """A question a run asked a human; the run waits until it is decided (or expires)."""

    id: str
    run_id: str
    step: str
    kind: InterruptKind
    prompt: str = ""
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    status: InterruptStatus
    decision: Decision | None = None
    expires_at: float | None = None
    created_at: float
    decided_at: float | None = None

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    @classmethod
    def from_row(cls, row: Row) -> Interrupt:
        decision = loads(row["decision"])
        return cls(
            id=row["id"],
            run_id=row["run_id"],
            step=row["step"],
            kind=row["kind"],
            prompt=row["prompt"],
            schema=loads(row["schema"]),
            status=row["status"],
            decision=Decision(**decision) if decision else None,
            expires_at=row["expires_at"],
            created_at=row["created_at"],
            decided_at=row["decided_at"],
        )

    def public(self) -> dict[str, Any]:
        """The CONTRACT §2 interrupt dict (``interrupt_id`` and ``id`` both present)."""
        return {
            "interrupt_id": self.id,
            "id": self.id,
            "run_id": self.run_id,
            "step": self.step,
            "kind": self.kind,
            "prompt": self.prompt,
            "schema": self.schema_,
            "status": self.status,
            "decision": self.decision.model_dump() if self.decision else None,
            "expires_at": self.expires_at,
            "created_at": self.created_at,
        }


_EFFECT_COLUMNS: tuple[str, ...] = ("id", "run_id", "step", "visit", "key", "effect_class", "status", "error")
_EFFECT_COLUMNS += ("created_at", "updated_at")


class Effect(_Record):
    """One entry of the effect ledger."""

    id: str
    run_id: str
    step: str
    visit: int
    key: str
    effect_class: Literal["none", "read_only", "idempotent", "non_idempotent"]
    status: EffectStatus
    result: Any = None
    error: str | None = None
    created_at: float
    updated_at: float

    @classmethod
    def from_row(cls, row: Row) -> Effect:
        return cls(**{k: row[k] for k in _EFFECT_COLUMNS}, result=loads(row["result"]))

    def public(self) -> dict[str, Any]:
        return {"effect_id": self.id, **self.model_dump()}


class Event(_Record):
    """One entry of a run's ordered event log."""

    run_id: str
    seq: int
    type: str
    data: dict[str, Any]
    created_at: float

    @classmethod
    def from_row(cls, row: Row) -> Event:
        return cls(
            run_id=row["run_id"],
            seq=row["seq"],
            type=row["type"],
            data=loads(row["data"]),
            created_at=row["created_at"],
        )


class Run(_Record):
    """A durable run of a workflow (CONTRACT §2), with its pending interrupts."""

    id: str
    tenant: str
    project: str
    workflow: str
    plan_hash: str
    session_id: str | None
    output_session_id: str | None
    input: dict[str, Any]
    status: RunStatus
    state: Any
    step: str | None
    visit: int
    attempt: int
    error: str | None
    idempotency_key: str | None
    request_hash: str = ""
    deadline: float | None
    next_at: float
    lease_owner: str | None
    lease_token: int
    cancel_requested: bool
    last_seq: int
    created_at: float
    updated_at: float
    pending_interrupts: tuple[Interrupt, ...] = ()
    result: Any = None
    forked_from: str | None = None
    forked_from_seq: int | None = None
    schedule_id: str | None = None
    priority: int = 0
    trace_context: str | None = None
    notify_url: str | None = None
    """Where the run's summary is POSTed when it waits on a human or ends (not in the summary: a URL may
    carry a receiver's token)."""

    @property
    def run_id(self) -> str:
        return self.id

    @property
    def trace_id(self) -> str | None:
        """The id of the trace the run's spans are in (32 hex digits), or None: not traced."""
        return trace_id_of(self.trace_context)

    def origin(self) -> dict[str, Any] | None:
        """``{run_id, checkpoint_seq}`` of the checkpoint this run was forked from (None: not a fork)."""
        if self.forked_from is None:
            return None
        return {"run_id": self.forked_from, "checkpoint_seq": self.forked_from_seq}

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @classmethod
    def from_row(cls, row: Row, pending: tuple[Interrupt, ...] = ()) -> Run:
        return cls(
            id=row["id"],
            tenant=row["tenant"],
            project=row["project"],
            workflow=row["workflow"],
            plan_hash=row["plan_hash"],
            session_id=row["session_id"],
            output_session_id=row["output_session_id"],
            input=loads(row["input"]),
            status=row["status"],
            state=loads(row["state"]),
            step=row["step"],
            visit=row["visit"],
            attempt=row["attempt"],
            error=row["error"],
            idempotency_key=row["idempotency_key"],
            request_hash=row["request_hash"],
            deadline=row["deadline"],
            next_at=row["next_at"],
            lease_owner=row["lease_owner"],
            lease_token=row["lease_token"],
            cancel_requested=bool(row["cancel_requested"]),
            last_seq=row["last_seq"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            pending_interrupts=pending,
            result=loads(row["result"]),
            forked_from=row["forked_from"],
            forked_from_seq=row["forked_from_seq"],
            schedule_id=row["schedule_id"],
            priority=row["priority"],
            trace_context=row["trace_context"],
            notify_url=row["notify_url"],
        )

    def summary(self) -> dict[str, Any]:
        """Exactly the CONTRACT run summary."""
        return {
            "run_id": self.id,
            "workflow": self.workflow,
            "status": self.status,
            "step": self.step,
            "session_id": self.session_id,
            "output_session_id": self.output_session_id,
            "result": self.result,
            "error": self.error,
            "pending_interrupts": [i.public() for i in self.pending_interrupts],
            "forked_from": self.origin(),
            "schedule_id": self.schedule_id,
            "priority": self.priority,
            "trace_id": self.trace_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }
