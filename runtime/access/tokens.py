"""Bearer tokens: made once, stored only as a keyed hash, checked in constant time on every request.

A token's text is ``rath.<token id>.<secret>``: the id says which row to read (one indexed lookup,
so a request costs one small read), the secret is 256 random bits. The store keeps
``HMAC-SHA256(salt, secret)`` with a random salt of the token's own. A fast hash is enough here,
unlike for passwords: a 256-bit random secret cannot be guessed, so slowing each guess buys
nothing, and the per-token salt makes equal hashes meaningless and precomputed tables useless.
The comparison is ``hmac.compare_digest``. Nothing is cached: each request reads the row, so a
revocation by any process on the same store takes effect on the next request everywhere.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from runtime.access.rates import check_burst, limit_of
from runtime.access.store import TokenRecord, TokenStore
from runtime.errors import InvalidInputError, NotFoundError
from runtime.ids import is_id, new_id, now

PREFIX = "rath"
_SCOPE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
_TTL = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_TTL_S = 3650 * 86400


def parse_ttl(text: str) -> float:
    """``30d``, ``12h``, ``15m``, ``90s``, ``2w`` as seconds; a clear error otherwise."""
    found = _TTL.match(text or "")
    seconds = int(found.group(1)) * _UNIT_S[found.group(2)] if found else 0
    if not 0 < seconds <= MAX_TTL_S:
        raise InvalidInputError(
            f"--ttl {text!r} is not a lifetime: give a whole number and a unit, such as 30d, 12h, 15m or 90s "
            "(at most 3650d)"
        )
    return float(seconds)


def _digest(salt: bytes, secret: str) -> bytes:
    return hmac.new(salt, secret.encode(), hashlib.sha256).digest()


@dataclass(frozen=True)
class Verdict:
    """What checking a presented token found: the token, or why it does not authenticate."""

    token: TokenRecord | None
    reason: str | None = None  # malformed | unknown | wrong_secret | expired | revoked
    token_id: str | None = None  # the id the text named, even when refused (for the audit trail)

    @property
    def ok(self) -> bool:
        return self.token is not None


class TokenService:
    """Create, list, revoke and verify tokens on a ``TokenStore``; ``grants`` is the allowed vocabulary."""

    def __init__(self, store: TokenStore, grants: Iterable[str], *, clock: Callable[[], float] = now) -> None:
        self.store = store
        self.grants = tuple(grants)
        self.clock = clock

    def _check(self, tenant: str, project: str, grants: Iterable[str]) -> tuple[str, ...]:
        for label, value in (("--tenant", tenant), ("--project", project)):
            if not _SCOPE.match(value or ""):
                raise InvalidInputError(f"{label} {value!r} must be 1-100 letters, digits, '-', '_' or '.'")
        chosen = tuple(dict.fromkeys(g.strip() for g in grants if g.strip()))
        if not chosen:
            raise InvalidInputError(f"--grants is empty: name one or more of {', '.join(self.grants)}")
        if unknown := [g for g in chosen if g not in self.grants]:
            raise InvalidInputError(f"unknown grant {unknown[0]!r}: choose from {', '.join(self.grants)}")
        return chosen

    async def create(
        self,
        tenant: str,
        project: str,
        grants: Iterable[str],
        *,
        name: str | None = None,
        ttl_s: float | None = None,
        rate: float | None = None,
        burst: int | None = None,
    ) -> tuple[TokenRecord, str]:
        """A new token and its text (shown once: only its hash is kept). ``rate``: requests a second it
        may make across every server of the store (``burst`` at once; ``runtime.access.rates``)."""
        chosen = self._check(tenant, project, grants)
        burst = check_burst(burst, rate)
        if name is not None and not 0 < len(name) <= 200:
            raise InvalidInputError("--name must be 1 to 200 characters")
        token_id, secret, salt = new_id("tok"), secrets.token_urlsafe(32), secrets.token_bytes(16)
        created = self.clock()
        record = TokenRecord(
            id=token_id,
            name=name,
            tenant=tenant,
            project=project,
            grants=chosen,
            salt=salt,
            digest=_digest(salt, secret),
            created_at=created,
            expires_at=None if ttl_s is None else created + ttl_s,
            rate=rate,
            burst=limit.burst if (limit := limit_of(rate, burst)) else None,
        )
        await self.store.add(record)
        return record, f"{PREFIX}.{token_id}.{secret}"

    async def list(self) -> list[TokenRecord]:
        return await self.store.list()

    async def revoke(self, token_id: str) -> TokenRecord:
        if not is_id(token_id, "tok"):
            raise InvalidInputError(f"{token_id!r} is not a token id: give one such as tok_0190f3c2a1b4e5f60718293a")
        revoked = await self.store.revoke(token_id, self.clock())
        if revoked is None:
            raise NotFoundError(f"no token {token_id}: `rath-mcp token list` shows the ids")
        return revoked

    async def take(self, record: TokenRecord) -> float:
        """Count one request of ``record`` against its rate limit: 0.0 when within it (or it has none),
        else the seconds until a request would be let in (this one is not counted)."""
        limit = limit_of(record.rate, record.burst)
        if limit is None:
            return 0.0
        return await self.store.take(record.id, self.clock(), limit.interval_s, limit.tolerance_s)

    async def verify(self, text: str) -> Verdict:
        """Check a presented token: one read of its row, a constant-time comparison, expiry, revocation."""
        parts = text.split(".")
        if len(parts) != 3 or parts[0] != PREFIX or not is_id(parts[1], "tok") or not parts[2]:
            return Verdict(None, "malformed")
        token_id, secret = parts[1], parts[2]
        record = await self.store.get(token_id)
        if record is None:
            _digest(b"\0" * 16, secret)  # the same work as a known id: timing does not tell ids apart
            return Verdict(None, "unknown", token_id)
        if not hmac.compare_digest(_digest(record.salt, secret), record.digest):
            return Verdict(None, "wrong_secret", token_id)
        if record.revoked_at is not None:
            return Verdict(None, "revoked", token_id)
        if record.expires_at is not None and self.clock() >= record.expires_at:
            return Verdict(None, "expired", token_id)
        return Verdict(record, None, token_id)
