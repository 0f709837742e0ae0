"""What every backend's run store decides and says alike, so that a run behaves and reads the same on each.

The scope a worker's query works in (``Scope``; ``None`` is every scope of the store). The rules: the
change to a run whose worker is gone (``lost_worker_change``, for the reaper and for a takeover) and
which run fields a change may set (``check_change``). The messages: the errors a store gives for what
is not there or not in the state asked, and for a reused idempotency key (naming the parts of the
request that differ, from the ``request_fingerprint`` stored with the key). The records and
protocols these serve are in ``runtime.durable.store``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runtime.durable.models import Decision, Row
from runtime.durable.store import MAX_LOST_LEASES, RUN_FIELDS, RunChange, dumps
from runtime.errors import ConflictError, InvalidInputError, NotFoundError


@dataclass(frozen=True)
class Scope:
    """One tenant/project of a store."""

    tenant: str
    project: str


def scope_args(scope: Scope | None) -> tuple[str | None, str | None]:
    """The worker's queries (claims, readiness, reaping) take ``Scope | None``, ``None`` being every scope:
    they match ``tenant = COALESCE(?, tenant)``, one statement for both (no index is on tenant there)."""
    return (None, None) if scope is None else (scope.tenant, scope.project)


def lost_worker_change(row: Row, ambiguous: Sequence[str], lost: int, at: float) -> dict[str, Any]:
    """The change to a running run whose worker is gone (its lease expired, or its process ended), the same on
    every backend: cancelled if that was asked, ``needs_review`` with ``ambiguous`` effects, failed after
    ``MAX_LOST_LEASES`` (``lost`` counts this loss), else queued at ``at``. ``row`` has the run's columns."""
    sets: dict[str, Any] = {"lease_owner": None, "lease_expires": None, "lost_leases": lost}
    if row["cancel_requested"]:
        sets.update(status="cancelled", error=f"cancelled: {row['cancel_reason'] or 'by request'}")
    elif ambiguous:
        sets.update(
            status="needs_review",
            error=f"effect(s) {list(ambiguous)} were in flight when worker {row['lease_owner']} lost its lease; "
            "resolve each with resolve_effect(effect_id, 'applied'|'not_applied')",
        )
    elif lost >= MAX_LOST_LEASES:
        sets.update(
            status="failed",
            error=f"step {row['step']!r} lost its worker {lost} times in a row (it may crash its process); "
            "fix the step and start a new run",
        )
    else:
        sets.update(status="queued", next_at=at)
    return sets


def check_change(change: RunChange) -> None:
    """Refuse a change that sets anything but ``RUN_FIELDS``: its keys become column names in the UPDATE a
    backend builds, so an unknown one is a programming error, stopped before any SQL is made of it."""
    unknown = set(change) - RUN_FIELDS
    if unknown:
        raise ValueError(f"not run fields a change may set: {sorted(unknown)}")


# -- the messages every store gives (so they read the same on every backend) -------------------
def no_run(run_id: str, tenant: str, project: str) -> NotFoundError:
    return NotFoundError(f"no run {run_id} in {tenant}/{project}; list runs with run_list")


def _differing(old: str, new: str) -> list[str]:
    """The parts two fingerprints (``request_fingerprint``) disagree on; none when either is no fingerprint
    (such as the empty ``request_hash`` of a run created without one)."""
    try:
        before, after = json.loads(old), json.loads(new)
    except ValueError:
        return []
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def idempotency_conflict(key: str, run_id: str, old: str = "", new: str = "") -> ConflictError:
    """The error for a *different* request under a used key, naming what differs."""
    parts = _differing(old, new)
    what = ", ".join(parts) if parts else "workflow, message, session, input or deadline"
    return ConflictError(
        f"idempotency key {key!r} was used for run {run_id} by a request with a different {what}; "
        "repeat the same request to get that run, or use a new key for a new request"
    )


def no_interrupt(interrupt_id: str) -> NotFoundError:
    return NotFoundError(f"no interrupt {interrupt_id}; list pending ones with interrupt_list")


def interrupt_not_pending(interrupt_id: str, status: str) -> ConflictError:
    return ConflictError(f"interrupt {interrupt_id} is already {status}; only a pending interrupt can be decided")


def no_effect(effect_id: str) -> NotFoundError:
    return NotFoundError(f"no effect {effect_id}; list ambiguous ones with effect_list")


def effect_not_ambiguous(effect_id: str, status: str) -> ConflictError:
    return ConflictError(f"effect {effect_id} is {status}, not ambiguous; only ambiguous effects are resolved")


def decision_json(decision: Decision) -> str:
    try:
        return dumps(decision.model_dump())
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"value must be JSON-serialisable: {exc}") from None
