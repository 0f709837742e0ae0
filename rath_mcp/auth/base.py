"""What turns a presented bearer token into a ``Principal``: the token store, or (``oauth``) a JWT issuer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from rath_mcp.principal import GRANTS, Principal
from runtime.access.rates import limit_of

if TYPE_CHECKING:  # made by ``remote_for`` for --auth token only
    from runtime.access.tokens import TokenService

#: What a 401 says for each way a rath token fails (the same words for unknown and wrong: ids stay secret).
#: ASCII only: the words go into the ``WWW-Authenticate`` header too, and header values are ASCII.
_TOKEN_WORDS = {
    "malformed": "the bearer token is not a rath-mcp token (rath.tok_ID.SECRET); make one with `rath-mcp token create`",
    "unknown": "the bearer token is not valid",
    "wrong_secret": "the bearer token is not valid",
    "expired": "the bearer token has expired; create a new one with `rath-mcp token create`",
    "revoked": "the bearer token has been revoked",
}


@dataclass(frozen=True)
class Refusal:
    """Why a token does not authenticate: a reason code (metrics, audit) and words for the caller."""

    reason: str
    description: str
    actor: str | None = None  # the token id or subject, when the token named one
    retry_after_s: float | None = None  # over a rate limit: when a call would be let in


class Authenticator(Protocol):
    mode: str  # none | token | oauth
    authorization_servers: list[str]

    async def authenticate(self, token: str | None, resource: str) -> Principal | Refusal:
        """The caller ``token`` stands for (``None``: no token presented), for the resource URL ``resource``."""
        ...

    async def take(self, principal: Principal) -> Refusal | None:
        """Count one call of ``principal`` against its rate limit: a ``rate_limited`` refusal when over it."""
        ...


class LocalAuthenticator:
    """``--auth none``: every request is the server's local principal (only on a loopback host)."""

    mode = "none"
    authorization_servers: list[str] = []  # noqa: RUF012 - read only

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    async def authenticate(self, token: str | None, resource: str) -> Principal | Refusal:
        return self.principal

    async def take(self, principal: Principal) -> Refusal | None:
        return None


class TokenAuthenticator:
    """``--auth token``: rath tokens from the store, each request reading its row (revocation is immediate)."""

    mode = "token"
    authorization_servers: list[str] = []  # noqa: RUF012 - read only

    def __init__(self, tokens: TokenService) -> None:
        self.tokens = tokens

    async def authenticate(self, token: str | None, resource: str) -> Principal | Refusal:
        if token is None:
            return Refusal("missing_token", "a bearer token is required: send Authorization: Bearer <token>")
        verdict = await self.tokens.verify(token)
        if verdict.token is None:
            reason = verdict.reason or "invalid"
            return Refusal(reason, _TOKEN_WORDS.get(reason, "the bearer token is not valid"), verdict.token_id)
        record = verdict.token
        grants = frozenset(g for g in record.grants if g in GRANTS)
        return Principal(
            actor=record.id,
            tenant=record.tenant,
            project=record.project,
            grants=grants,
            method="token",
            rate=record.rate,
            burst=record.burst,
        )

    async def take(self, principal: Principal) -> Refusal | None:
        """The store counts it, so the limit holds across every server of the store (``runtime.access.rates``)."""
        limit = limit_of(principal.rate, principal.burst)
        if limit is None:
            return None
        wait_s = await self.tokens.store.take(principal.actor, self.tokens.clock(), limit.interval_s, limit.tolerance_s)
        if wait_s <= 0:
            return None
        words = f"token {principal.actor} is over its rate limit of {limit.describe()}: retry after {wait_s:.2f} s"
        return Refusal("rate_limited", words, principal.actor, retry_after_s=wait_s)
