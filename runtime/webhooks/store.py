"""``WebhookStore``: what run notifications need of a store (``runtime/store/core/webhooks.py`` is it).

A delivery is one notification of one run (it waited on a human, or it ended): its ``id`` is the
``webhook-id`` sent on every try, its ``body`` the exact bytes signed and sent each time. The row is
written by the run's own transaction; senders only claim, try and record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from runtime.durable.store_shared import Scope

PENDING, DELIVERED, FAILED, GONE = "pending", "delivered", "failed", "gone"
"""A delivery's status: still to send (or being sent); answered with a 2xx; given up (24 h of failures);
refused for good by its receiver (HTTP 410 Gone: no more tries)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """A claimed delivery: what its sender needs to send it once, and the token that fences its record."""

    id: str
    run_id: str
    url: str
    event: str
    body: str
    attempts: int
    token: int
    expires_at: float

    @classmethod
    def from_row(cls, row: Any) -> Delivery:
        return cls(
            id=row["id"],
            run_id=row["run_id"],
            url=row["url"],
            event=row["event"],
            body=row["body"],
            attempts=row["attempts"],
            token=row["lease_token"],
            expires_at=row["expires_at"],
        )


@dataclass(frozen=True, slots=True)
class Attempt:
    """How one try ended, as recorded: the delivery's status after it, when to try next (pending only),
    the receiver's HTTP status (None: no answer) and what went wrong (None: nothing)."""

    status: str
    next_at: float
    code: int | None
    error: str | None
    at: float


class WebhookStore(Protocol):
    """Deliveries of every tenant/project: senders serve them all; ``last`` reads one run's, in its scope."""

    async def has_due(self, at: float) -> bool:
        """Whether a pending delivery is due at ``at`` (a read: senders look before they claim)."""
        ...

    async def prune(self, before: float) -> int:
        """Delete deliveries that are over (delivered, gone, failed) and were made before ``before``."""
        ...

    async def claim(self, owner: str, at: float, lease_s: float, limit: int) -> list[Delivery]:
        """Take up to ``limit`` pending deliveries due at ``at``, each for ``lease_s`` (then due again,
        for any sender: a sender that died mid-try loses nothing). Earliest due first."""
        ...

    async def record(self, delivery: Delivery, attempt: Attempt) -> bool:
        """Record a try of a delivery this sender still holds; False when another sender took it since."""
        ...

    async def last(self, scope: Scope, run_id: str) -> dict[str, Any] | None:
        """The run's latest delivery (``webhook_id``, ``event``, ``status``, ``attempts``, ``code``, ``at``,
        ``error``, ``next_at``), or None when it has none."""
        ...
