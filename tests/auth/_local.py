"""Real HTTP on 127.0.0.1 for the auth tests: any ASGI app under uvicorn, and a local OAuth issuer.

``LocalIssuer`` is a small authorization server speaking the real wire: RFC 8414 metadata at
``/.well-known/oauth-authorization-server``, a JWKS at ``/jwks``, and a token endpoint granting
``client_credentials`` (client_secret_basic or _post) that issues ES256 JWT access tokens with
``aud`` = the RFC 8707 ``resource`` asked for. It can also mint tokens directly (for the expired,
wrong-audience, … cases) and rotate its signing key. Counts every JWKS fetch.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp


class _Server(uvicorn.Server):
    """uvicorn that says when it listens (an event, not a poll)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = anyio.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.listening.set()


@asynccontextmanager
async def served(app: ASGIApp) -> AsyncIterator[str]:
    """``app`` on a free port of 127.0.0.1 for the block; yields its base URL."""
    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(20):
            await server.listening.wait()
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


class LocalIssuer:
    """An OAuth authorization server with one client and a rotating ES256 key."""

    client_id = "team-bot"
    client_secret = "s3cret-of-the-bot"

    def __init__(self, tenant: str = "acme", project: str = "web") -> None:
        self.url = ""  # set once served
        self.tenant, self.project = tenant, project
        self.keys: list[tuple[str, ec.EllipticCurvePrivateKey]] = []
        self.jwks_fetches = 0
        self.rotate()

    def rotate(self) -> str:
        """A new signing key (the old one stays published); returns its kid."""
        kid = uuid.uuid4().hex[:12]
        self.keys.append((kid, ec.generate_private_key(ec.SECP256R1())))
        return kid

    def drop_old_keys(self) -> None:
        self.keys = self.keys[-1:]

    def jwks(self) -> dict[str, Any]:
        published = []
        for kid, key in self.keys:
            entry = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
            published.append({**entry, "kid": kid, "alg": "ES256", "use": "sig"})
        return {"keys": published}

    def mint(self, audience: str, scope: str = "admin", **claims: Any) -> str:
        kid, key = self.keys[-1]
        issued = int(time.time())
        body: dict[str, Any] = {
            "iss": self.url,
            "sub": self.client_id,
            "aud": audience,
            "iat": issued,
            "exp": issued + 600,
            "scope": scope,
            "rath_tenant": self.tenant,
            "rath_project": self.project,
        }
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key, algorithm="ES256", headers={"kid": kid})

    def app(self) -> Starlette:
        async def metadata(request: Request) -> JSONResponse:
            return JSONResponse(
                {
                    "issuer": self.url,
                    "authorization_endpoint": f"{self.url}/authorize",  # required by RFC 8414; unused here
                    "token_endpoint": f"{self.url}/token",
                    "jwks_uri": f"{self.url}/jwks",
                    "grant_types_supported": ["client_credentials"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                    "response_types_supported": ["code"],
                    "scopes_supported": ["admin", "session.read", "session.write", "metrics.read"],
                }
            )

        async def keys(request: Request) -> JSONResponse:
            self.jwks_fetches += 1
            return JSONResponse(self.jwks())

        async def token(request: Request) -> JSONResponse:
            form = await request.form()
            client_id, secret = str(form.get("client_id", "")), str(form.get("client_secret", ""))
            basic = request.headers.get("authorization", "")
            if basic.lower().startswith("basic "):
                client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            if (client_id, secret) != (self.client_id, self.client_secret):
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            if form.get("grant_type") != "client_credentials":
                return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
            audience = str(form.get("resource", ""))
            scope = str(form.get("scope") or "admin")
            access = self.mint(audience, scope)
            return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 600, "scope": scope})

        return Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", metadata),
                Route("/jwks", keys),
                Route("/token", token, methods=["POST"]),
            ]
        )


@asynccontextmanager
async def local_issuer(**kwargs: Any) -> AsyncIterator[LocalIssuer]:
    issuer = LocalIssuer(**kwargs)
    async with served(issuer.app()) as url:
        issuer.url = url
        yield issuer
