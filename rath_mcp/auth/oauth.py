"""``--auth oauth``: an OAuth 2.1 resource server that validates JWT access tokens (RFC 9068) itself.

The issuer's keys are found the standard way: its RFC 8414 metadata
(``/.well-known/oauth-authorization-server``, path inserted after the host), else OpenID Connect
discovery (``/.well-known/openid-configuration``), whose ``issuer`` must be the configured one;
then its ``jwks_uri``. A token is checked with PyJWT: an asymmetric signature by a key of that set
(``kid``), ``iss``, ``aud`` (this server's resource URL, or ``--audience``), ``exp`` and ``nbf``
with a small leeway. A ``kid`` not in the set fetches the set again, once, and at most once per
``refetch_interval_s`` (key rotation, without letting made-up kids hammer the issuer). Grants come
from ``scope``, the tenant and project from the ``rath_tenant`` / ``rath_project`` claims.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import jwt

from rath_mcp.auth.base import Refusal
from rath_mcp.principal import GRANTS, Principal
from runtime.errors import InvalidInputError

logger = logging.getLogger(__name__)

#: Signatures accepted: asymmetric only (never ``none``, never an HMAC a public key could forge).
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY_S = 30.0
REFETCH_INTERVAL_S = 30.0
_SCOPE_VALUE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")

_JWT_ERRORS: list[tuple[type[Exception], str, str]] = [
    (jwt.ExpiredSignatureError, "expired", "the access token has expired"),
    (jwt.InvalidAudienceError, "wrong_audience", "the access token was not issued for this server (aud)"),
    (jwt.InvalidIssuerError, "wrong_issuer", "the access token was not issued by this server's issuer (iss)"),
    (jwt.ImmatureSignatureError, "not_yet_valid", "the access token is not valid yet (nbf/iat)"),
    (jwt.InvalidSignatureError, "bad_signature", "the access token's signature does not verify"),
    (jwt.MissingRequiredClaimError, "missing_claim", "the access token lacks a required claim"),
]


def check_issuer(issuer: str) -> str:
    """The issuer URL if usable: https, or http on a loopback host (a local issuer); else a clear error."""
    parts = urlsplit(issuer)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(f"--issuer {issuer!r} is not a URL: give the issuer's https URL")
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK:
        raise InvalidInputError(f"--issuer {issuer} must use https (plain http only for a loopback issuer)")
    if parts.query or parts.fragment:
        raise InvalidInputError(f"--issuer {issuer} must have no query or fragment (RFC 8414)")
    return issuer


def discovery_urls(issuer: str) -> list[str]:
    """Where the issuer's metadata may be: RFC 8414 first, then the OpenID Connect forms."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    base = f"{parts.scheme}://{parts.netloc}"
    return [
        f"{base}/.well-known/oauth-authorization-server{path}",
        f"{base}/.well-known/openid-configuration{path}",
        f"{base}{path}/.well-known/openid-configuration",
    ]


class JWTAuthenticator:
    """Validates JWT access tokens of one issuer; the JWKS is fetched on first use and on rotation."""

    mode = "oauth"

    def __init__(
        self,
        issuer: str,
        *,
        audience: str | None = None,
        leeway_s: float = LEEWAY_S,
        refetch_interval_s: float = REFETCH_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.issuer = check_issuer(issuer)
        self.audience = audience
        self.leeway_s = leeway_s
        self.refetch_interval_s = refetch_interval_s
        self.clock = clock
        self.transport = transport
        self.authorization_servers = [issuer]
        self.jwks_uri: str | None = None
        self.keys: dict[str | None, jwt.PyJWK] = {}
        self.fetches = 0
        self._fetched_at: float | None = None
        self._lock = anyio.Lock()

    async def _get_json(self, client: httpx.AsyncClient, url: str) -> dict[str, Any] | None:
        response = await client.get(url, headers={"accept": "application/json"})
        if response.status_code != 200:
            return None
        body = response.json()
        return body if isinstance(body, dict) else None

    async def _discover(self, client: httpx.AsyncClient) -> str:
        for url in discovery_urls(self.issuer):
            metadata = await self._get_json(client, url)
            if metadata is None:
                continue
            if str(metadata.get("issuer", "")).rstrip("/") != self.issuer.rstrip("/"):
                raise ValueError(f"the metadata at {url} names issuer {metadata.get('issuer')!r}, not {self.issuer}")
            jwks_uri = metadata.get("jwks_uri")
            if not isinstance(jwks_uri, str):
                raise ValueError(f"the metadata at {url} has no jwks_uri")
            return jwks_uri
        raise ValueError(f"the issuer {self.issuer} publishes no RFC 8414 or OpenID metadata")

    async def _fetch_keys(self) -> None:
        """Discover (once) and fetch the JWKS; keys that PyJWT cannot use (other kinds) are left out."""
        self._fetched_at = self.clock()
        self.fetches += 1
        async with httpx.AsyncClient(transport=self.transport, timeout=5.0, follow_redirects=False) as client:
            if self.jwks_uri is None:
                self.jwks_uri = await self._discover(client)
            jwks = await self._get_json(client, self.jwks_uri)
        if jwks is None:
            raise ValueError(f"the issuer's JWKS at {self.jwks_uri} did not answer with a key set")
        keys: dict[str | None, jwt.PyJWK] = {}
        for entry in jwks.get("keys", []):
            try:
                key = jwt.PyJWK(entry)
            except jwt.PyJWTError:
                continue
            keys[entry.get("kid")] = key
        self.keys = keys

    async def _key(self, kid: str | None) -> jwt.PyJWK | None:
        async with self._lock:
            due = self._fetched_at is None or self.clock() - self._fetched_at >= self.refetch_interval_s
            if kid not in self.keys and (self._fetched_at is None or due):
                await self._fetch_keys()
            if kid is None and len(self.keys) == 1:
                return next(iter(self.keys.values()))
            return self.keys.get(kid)

    async def authenticate(self, token: str | None, resource: str) -> Principal | Refusal:
        if token is None:
            return Refusal("missing_token", "an OAuth access token is required: send Authorization: Bearer <token>")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return Refusal("malformed", "the bearer token is not a JWT access token")
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            return Refusal("bad_algorithm", f"the access token's algorithm {alg!r} is not accepted")
        try:
            key = await self._key(header.get("kid"))
        except (httpx.HTTPError, ValueError) as exc:
            logger.warning("could not fetch the keys of %s: %s", self.issuer, exc)
            return Refusal("issuer_unavailable", "the issuer's keys could not be fetched; try again later")
        if key is None:
            return Refusal("unknown_key", "the access token is signed by a key the issuer does not publish")
        return self._check(token, key.key, str(alg), self.audience or resource)

    async def take(self, principal: Principal) -> Refusal | None:
        return None  # rate limits are rath tokens' (``token create --rate``); an issuer's tokens carry none

    def _check(self, token: str, key: Any, alg: str, audience: str) -> Principal | Refusal:
        try:
            claims = jwt.decode(
                token,
                key=key,
                algorithms=[alg],
                audience=audience,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            for kind, reason, words in _JWT_ERRORS:
                if isinstance(exc, kind):
                    return Refusal(reason, words)
            return Refusal("invalid", "the access token is not valid")
        return principal_from_claims(claims)


def principal_from_claims(claims: dict[str, Any]) -> Principal | Refusal:
    """The caller a validated token's claims describe, or why they describe none."""
    actor = claims.get("sub") or claims.get("client_id") or claims.get("azp")
    where: dict[str, str] = {}
    for claim in ("rath_tenant", "rath_project"):
        value = claims.get(claim)
        if not isinstance(value, str) or not _SCOPE_VALUE.match(value):
            return Refusal(
                "missing_scope_claim",
                f"the access token has no valid {claim} claim: the issuer must add rath_tenant and rath_project "
                "(letters, digits, '-', '_' or '.')",
                str(actor) if actor else None,
            )
        where[claim] = value
    raw = claims.get("scope", "")
    scopes = (
        raw.split() if isinstance(raw, str) else [s for s in raw if isinstance(s, str)] if isinstance(raw, list) else []
    )
    grants = frozenset(s for s in scopes if s in GRANTS)
    return Principal(
        actor=str(actor or "unknown"),
        tenant=where["rath_tenant"],
        project=where["rath_project"],
        grants=grants,
        method="oauth",
    )
