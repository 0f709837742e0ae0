"""What ``serve`` puts around the MCP server for remote use: the authenticator, the audit trail,
metrics and health, built once per server and shared by the HTTP gate and the SDK middleware."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rath_mcp.audit import Auditor
from rath_mcp.auth.base import Authenticator, LocalAuthenticator, TokenAuthenticator
from rath_mcp.ops import ServerMetrics
from rath_mcp.principal import GRANTS, Principal
from runtime import Runtime

if TYPE_CHECKING:
    from starlette.types import ASGIApp


@dataclass
class Remote:
    """One server's authentication, audit, metrics and health (the local principal's where auth is off)."""

    authenticator: Authenticator
    auditor: Auditor
    metrics: ServerMetrics
    default: Principal
    rt: Runtime
    resource_url: str | None = None

    def gate(self, app: ASGIApp, resource_path: str) -> ASGIApp:
        """``app`` behind this server's gate (health, RFC 9728 metadata, metrics, bearer tokens)."""
        from rath_mcp.auth.gate import AuthGate  # HTTP only: a stdio server never loads it

        return AuthGate(
            app,
            self.authenticator,
            resource_path=resource_path,
            ops_store=self.rt.store.ops(),
            metrics=self.metrics,
            auditor=self.auditor,
            resource_url=self.resource_url,
        )


def remote_for(rt: Runtime, auth: str = "none", *, issuer: str | None = None, audience: str | None = None) -> Remote:
    """The remote-use parts for ``serve --auth``; ``none`` gives the local principal to every request."""
    default = Principal.local(rt.tenant, rt.project)
    authenticator: Authenticator
    if auth == "token":
        from runtime.access.tokens import TokenService

        authenticator = TokenAuthenticator(TokenService(rt.store.tokens(), GRANTS))
    elif auth == "oauth":
        if issuer is None:
            raise ValueError("--auth oauth needs an issuer")
        from rath_mcp.auth.oauth import JWTAuthenticator  # PyJWT is loaded only by servers that use it

        authenticator = JWTAuthenticator(issuer, audience=audience)
    else:
        authenticator = LocalAuthenticator(default)
    return Remote(
        authenticator=authenticator,
        auditor=Auditor(rt.store.audit()),
        metrics=ServerMetrics(rt.store.ops()),
        default=default,
        rt=rt,
        resource_url=audience,
    )
