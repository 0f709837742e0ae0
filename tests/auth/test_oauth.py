"""``serve --auth oauth``: JWT access tokens of a local authorization server (tests/auth/_local.py).

The issuer is a real HTTP server on 127.0.0.1 (RFC 8414 metadata, JWKS, client-credentials token
endpoint, ES256). Valid, expired, wrong audience, wrong issuer, tampered, rotated key, missing
tenant claim; the SDK's own OAuth client (``ClientCredentialsOAuthProvider``) discovers everything
from the 401 and calls a tool.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from rath_mcp.auth.oauth import JWTAuthenticator
from rath_mcp.auth.remote import Remote
from runtime import Runtime
from tests.auth._local import LocalIssuer, local_issuer
from tests.auth.conftest import Served, rath_http

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@asynccontextmanager
async def oauth_server(rt: Runtime, issuer: LocalIssuer, clock: Clock | None = None) -> AsyncIterator[Served]:
    def adjust(remote: Remote, _server: object) -> None:
        if clock is not None:
            remote.authenticator = JWTAuthenticator(issuer.url, clock=clock)

    async with rath_http(rt, auth="oauth", issuer=issuer.url, adjust=adjust) as served:
        yield served


async def status_of(served: Served, token: str) -> tuple[int, str]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        answer = await http.get(f"{served.base}/metrics")  # 200 once authenticated (the tokens carry admin)
    return answer.status_code, answer.json().get("error_description", "") if answer.status_code >= 400 else ""


async def a_tool_call_works(served: Served, token: str) -> None:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(served.mcp, http_client=http)) as connected,
    ):
        result = await connected.call_tool("session_create", {"message": "hi"})
        assert not result.is_error, result


async def test_a_valid_token_of_the_issuer_calls_tools_and_metadata_names_the_issuer(rt: Runtime) -> None:
    async with local_issuer() as issuer, oauth_server(rt, issuer) as served:
        await a_tool_call_works(served, issuer.mint(served.mcp))
        async with httpx2.AsyncClient() as http:
            body = (await http.get(f"{served.base}/.well-known/oauth-protected-resource/mcp")).json()
        assert body["authorization_servers"] == [issuer.url] and body["resource"] == served.mcp
    (record,) = [r for r in await rt.store.audit().recent(10) if r.action == "session_create"]
    assert (record.actor, record.tenant, record.project, record.outcome) == (issuer.client_id, "acme", "web", "ok")
    assert record.method == "oauth" and len(record.targets) == 1 and record.targets[0].startswith("ses_")


@pytest.mark.parametrize(
    "case",
    ["expired", "wrong_audience", "wrong_issuer", "tampered", "no_tenant", "not_a_jwt", "foreign_key"],
)
async def test_a_bad_access_token_is_refused_with_401_saying_why(rt: Runtime, case: str) -> None:
    async with local_issuer() as issuer, oauth_server(rt, issuer) as served:
        past = int(time.time()) - 3600
        token = {
            "expired": lambda: issuer.mint(served.mcp, exp=past, iat=past - 60),
            "wrong_audience": lambda: issuer.mint("http://127.0.0.1:1/mcp"),
            "wrong_issuer": lambda: issuer.mint(served.mcp, iss="http://127.0.0.1:2"),
            "tampered": lambda: _tampered(issuer.mint(served.mcp, scope="session.read")),
            "no_tenant": lambda: issuer.mint(served.mcp, rath_tenant=None),
            "not_a_jwt": lambda: "rath.tok_0190f3c2a1b4e5f60718293a.secret",
            "foreign_key": lambda: LocalIssuer().mint(served.mcp),  # signed by a key the issuer never published
        }[case]()
        status, why = await status_of(served, token)
    assert status == 401
    words = {
        "expired": "expired",
        "wrong_audience": "(aud)",
        "wrong_issuer": "(iss)",
        "tampered": "signature",
        "no_tenant": "rath_tenant",
        "not_a_jwt": "not a JWT",
        "foreign_key": "key the issuer does not publish",
    }
    assert words[case] in why
    assert len(await rt.sessions.ids()) == 0


def _tampered(token: str) -> str:
    """The same signature over a payload that claims more (scope admin)."""
    import base64
    import json

    head, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["scope"] = "admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{head}.{forged}.{signature}"


async def test_a_rotated_key_is_fetched_once_and_unknown_kids_do_not_hammer_the_issuer(rt: Runtime) -> None:
    clock = Clock()
    async with local_issuer() as issuer, oauth_server(rt, issuer, clock) as served:
        assert (await status_of(served, issuer.mint(served.mcp)))[0] == 200
        assert issuer.jwks_fetches == 1
        clock.t += 60  # past the refetch interval
        issuer.rotate()
        issuer.drop_old_keys()
        assert (await status_of(served, issuer.mint(served.mcp)))[0] == 200  # the new kid: one refetch
        assert issuer.jwks_fetches == 2
        for _ in range(3):  # made-up kids within the interval: refused without asking the issuer again
            assert (await status_of(served, LocalIssuer().mint(served.mcp)))[0] == 401
        assert issuer.jwks_fetches == 2


class MemoryStorage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_sdk_oauth_client_discovers_the_issuer_gets_a_token_and_calls_a_tool(rt: Runtime) -> None:
    async with local_issuer() as issuer, oauth_server(rt, issuer) as served:
        auth = ClientCredentialsOAuthProvider(
            served.mcp,
            MemoryStorage(),
            issuer.client_id,
            issuer.client_secret,
            scope="session.read session.write",
            issuer=issuer.url,
        )
        async with (
            httpx2.AsyncClient(auth=auth) as http,
            Client(streamable_http_client(served.mcp, http_client=http)) as connected,
        ):
            made = await connected.call_tool("session_create", {"message": "from a standard client"})
            assert not made.is_error, made
            assert made.structured_content is not None
    (record,) = [r for r in await rt.store.audit().recent(20) if r.action == "session_create"]
    assert record.actor == issuer.client_id and record.outcome == "ok"
