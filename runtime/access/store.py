"""The store protocols of the access layer: tokens and audit records.

Tokens and audit records are not confined to one tenant/project: a token *names* the scope it acts
in, and the audit trail is the operator's, across every scope. The store core implements these once
for both backends (``runtime/store/core/access.py``); one contract
suite (``tests/store/contracts/test_access_store.py``) runs on both.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

TOKEN_COLUMNS = "id, name, tenant, project, grants, salt, digest, created_at, expires_at, revoked_at, rate, burst"
AUDIT_COLUMNS = "at, actor, method, tenant, project, action, targets, outcome, reason"


@dataclass(frozen=True)
class TokenRecord:
    """A bearer token as stored: never its secret, only a keyed hash of it (``salt``, ``digest``)."""

    id: str
    name: str | None
    tenant: str
    project: str
    grants: tuple[str, ...]
    salt: bytes
    digest: bytes
    created_at: float
    expires_at: float | None = None
    revoked_at: float | None = None
    rate: float | None = None
    """Requests a second the token may make on average, across every server of the store (None: no limit)."""
    burst: int | None = None
    """Requests it may make at once, above ``rate`` (with a rate; ``runtime.access.rates``)."""

    @classmethod
    def from_row(cls, row: Any) -> TokenRecord:
        """From a row of either backend (``sqlite3.Row``, ``asyncpg.Record``: both read by column name)."""
        return cls(
            id=row["id"],
            name=row["name"],
            tenant=row["tenant"],
            project=row["project"],
            grants=tuple(json.loads(row["grants"])),
            salt=bytes(row["salt"]),
            digest=bytes(row["digest"]),
            created_at=row["created_at"],
            expires_at=row["expires_at"],
            revoked_at=row["revoked_at"],
            rate=row["rate"],
            burst=row["burst"],
        )

    def row(self) -> tuple[Any, ...]:
        """The values of ``TOKEN_COLUMNS``, in order, as both backends store them."""
        grants = json.dumps(list(self.grants))
        return (self.id, self.name, self.tenant, self.project, grants, self.salt, self.digest, self.created_at,
                self.expires_at, self.revoked_at, self.rate, self.burst)  # fmt: skip

    def public(self) -> dict[str, Any]:
        """What ``token list`` shows: everything but the hash."""
        return {
            "token_id": self.id,
            "name": self.name,
            "tenant": self.tenant,
            "project": self.project,
            "grants": list(self.grants),
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "revoked_at": self.revoked_at,
            "rate": self.rate,
            "burst": self.burst,
        }


@dataclass(frozen=True)
class AuditRecord:
    """One audited call: who, where, what, on which ids, and how it ended. Never argument values."""

    at: float
    actor: str
    tenant: str | None
    project: str | None
    action: str
    outcome: str  # "ok" | "error" | "refused"
    targets: tuple[str, ...] = ()
    reason: str | None = None
    method: str | None = None  # how the actor was authenticated: local, token, oauth, none
    seq: int | None = field(default=None, compare=False)  # given by the store

    @classmethod
    def from_row(cls, row: Any) -> AuditRecord:
        """From a row of either backend (read by column name)."""
        return cls(
            seq=row["seq"],
            at=row["at"],
            actor=row["actor"],
            method=row["method"],
            tenant=row["tenant"],
            project=row["project"],
            action=row["action"],
            targets=tuple(json.loads(row["targets"])),
            outcome=row["outcome"],
            reason=row["reason"],
        )

    def row(self) -> tuple[Any, ...]:
        """The values of ``AUDIT_COLUMNS``, in order."""
        targets = json.dumps(list(self.targets))
        return (self.at, self.actor, self.method, self.tenant, self.project, self.action, targets, self.outcome,
                self.reason)  # fmt: skip

    def as_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": self.at,
            "actor": self.actor,
            "method": self.method,
            "tenant": self.tenant,
            "project": self.project,
            "action": self.action,
            "targets": list(self.targets),
            "outcome": self.outcome,
            "reason": self.reason,
        }


class TokenStore(Protocol):
    async def add(self, token: TokenRecord) -> None:
        """Store a new token (its id is new: a clash is a ``StoreError``)."""

    async def get(self, token_id: str) -> TokenRecord | None:
        """The token with this id, revoked or expired ones included; ``None`` when there is none."""

    async def list(self) -> list[TokenRecord]:
        """Every token, oldest first."""

    async def revoke(self, token_id: str, at: float) -> TokenRecord | None:
        """Mark the token revoked at ``at`` (kept as it was if already revoked); ``None`` if unknown."""

    async def take(self, token_id: str, at: float, interval_s: float, tolerance_s: float) -> float:
        """Count one request of the token at ``at`` against its limit, in the store, atomically (GCRA:
        ``runtime.access.rates``): 0.0 when it is within it (counted), else the seconds until it would be
        (not counted)."""


class AuditStore(Protocol):
    async def append(self, records: Sequence[AuditRecord]) -> None:
        """Add records, in order, in one transaction."""

    async def recent(self, limit: int) -> list[AuditRecord]:
        """The last ``limit`` records, oldest first."""
