"""``AuthGate``: ASGI middleware in front of an MCP app (Streamable HTTP or SSE).

Without a token it answers only ``/health/live``, ``/health/ready`` and the RFC 9728 metadata at
``/.well-known/oauth-protected-resource`` (and ``…/mcp``, ``…/sse``). Every other request needs a
bearer token that the ``Authenticator`` accepts, else 401 with ``WWW-Authenticate: Bearer
resource_metadata="…", scope="…"`` (the MCP authorization spec, RFC 6750 §3); ``/metrics`` also
needs ``metrics.read``, else 403 ``insufficient_scope``. A POST of a token with a rate limit
(``token create --rate``) over it gets 429 with ``Retry-After`` and a JSON-RPC error naming the limit
(``runtime.access.rates``: counted in the store, so across servers). An accepted caller's ``Principal`` goes on
``request.state`` (``STATE_KEY``), and ``scope["user"]`` is set as the SDK expects, so the SDK binds
each MCP session to the principal that opened it.

The resource URL (the token audience in ``oauth`` mode, ``resource`` in the metadata) is the
configured one (``--audience``), else this server's own address as the socket reports it (never
the client's ``Host`` header, which a caller chooses) plus the transport's path.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from urllib.parse import urlsplit

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.authentication import AuthCredentials
from starlette.types import ASGIApp, Receive, Scope, Send

from rath_mcp import ops
from rath_mcp.audit import Auditor
from rath_mcp.auth.base import Authenticator, Refusal
from rath_mcp.ops import ServerMetrics
from rath_mcp.principal import GRANTS, STATE_KEY, Principal
from runtime.backend import OpsStore

WELL_KNOWN = "/.well-known/oauth-protected-resource"
METRICS_GRANT = "metrics.read"
#: The JSON-RPC error code of a call refused over its token's rate limit (the implementation-defined range).
RATE_LIMITED = -32029
#: The scope a 401 asks for on the MCP endpoint: every grant a tool may need (``admin`` left to ask for).
MCP_SCOPE = " ".join(g for g in GRANTS if g not in ("admin", METRICS_GRANT))


def _bearer(scope: Scope) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            text: str = value.decode("latin-1")
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return ""  # a header that is not a bearer token: refused as invalid, not as missing
    return None


def _origin(scope: Scope) -> str:
    scheme = scope.get("scheme", "http")
    server = scope.get("server")
    if server is None:  # a unix socket: the Host header is all there is
        host = dict(scope.get("headers", [])).get(b"host", b"localhost").decode("latin-1")
        return f"{scheme}://{host}"
    host, port = server[0], server[1]
    shown = f"[{host}]" if ":" in host else host
    default = (scheme == "http" and port == 80) or (scheme == "https" and port == 443)
    return f"{scheme}://{shown}" + ("" if default or port is None else f":{port}")


class AuthGate:
    """Health, metadata, metrics and authentication around ``app`` (whose lifespan passes through)."""

    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        *,
        resource_path: str,
        ops_store: OpsStore,
        metrics: ServerMetrics,
        auditor: Auditor,
        resource_url: str | None = None,
        extra_resource_paths: Sequence[str] = (),
    ) -> None:
        self.app = app
        self.auth = authenticator
        self.resource_path = resource_path
        self.resource_url = resource_url
        self.ops_store = ops_store
        self.metrics = metrics
        self.auditor = auditor
        self.metadata_paths = {WELL_KNOWN, WELL_KNOWN + resource_path, *(WELL_KNOWN + p for p in extra_resource_paths)}

    def resource(self, scope: Scope) -> str:
        return self.resource_url or _origin(scope) + self.resource_path

    def metadata_url(self, scope: Scope) -> str:
        parts = urlsplit(self.resource(scope))
        path = "" if parts.path in ("", "/") else parts.path
        return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, verb = scope.get("path", ""), scope.get("method", "GET")
        if path == "/health/live" and verb in ("GET", "HEAD"):
            await ops.live()(scope, receive, send)
            return
        if path == "/health/ready" and verb in ("GET", "HEAD"):
            await (await ops.ready(self.ops_store))(scope, receive, send)
            return
        if path in self.metadata_paths and verb in ("GET", "HEAD"):
            await self._send_json(send, 200, self.metadata(scope))
            return
        if _is_viewer_page(path) and verb in ("GET", "HEAD"):
            # The viewer's page is the same static HTML for everyone and holds no data: a browser
            # cannot put a bearer token on a page load, so the page asks for one (``#token=``) and
            # sends it on every /mcp call, where this gate checks it like any client's.
            await self.app(scope, receive, send)
            return
        found = await self.auth.authenticate(_bearer(scope), self.resource(scope))
        if isinstance(found, Refusal):
            scope_wanted = METRICS_GRANT if path == "/metrics" else MCP_SCOPE
            await self._refuse(scope, send, 401, found, scope_wanted)
            return
        if path == "/metrics":
            if not found.allows(METRICS_GRANT):
                refusal = Refusal("insufficient_scope", f"/metrics needs the grant {METRICS_GRANT}", found.actor)
                await self._refuse(scope, send, 403, refusal, METRICS_GRANT, found)
                return
            await (await self.metrics.exposition())(scope, receive, send)
            return
        if verb == "POST" and (over := await self.auth.take(found)) is not None:  # a call (a message): counted
            await self._too_many(scope, send, over, found)
            return
        await self.app(self._with_principal(scope, found), receive, send)

    def metadata(self, scope: Scope) -> dict[str, object]:
        """RFC 9728 protected resource metadata (``authorization_servers`` only where there is one)."""
        body: dict[str, object] = {"resource": self.resource(scope)}
        if self.auth.authorization_servers:
            body["authorization_servers"] = list(self.auth.authorization_servers)
        body["scopes_supported"] = list(GRANTS)
        body["bearer_methods_supported"] = ["header"]
        body["resource_name"] = "rath-mcp"
        return body

    @staticmethod
    def _with_principal(scope: Scope, principal: Principal) -> Scope:
        state = {**scope.get("state", {}), STATE_KEY: principal}
        token = AccessToken(
            token="(redacted)",
            client_id=principal.actor,
            scopes=sorted(principal.grants),
            subject=principal.actor,
            claims={"iss": f"rath-mcp:{principal.method}"},
        )
        return {
            **scope,
            "state": state,
            "user": AuthenticatedUser(token),
            "auth": AuthCredentials(sorted(principal.grants)),
        }

    async def _refuse(
        self, scope: Scope, send: Send, status: int, refusal: Refusal, wanted: str, who: Principal | None = None
    ) -> None:
        self.metrics.refused(refusal.reason)
        action = f"http {scope.get('method', '?')} {scope.get('path', '?')}"
        actor = refusal.actor or (who.actor if who else "anonymous")
        await self.auditor.record(
            actor, action, "refused", principal=who, reason=refusal.reason, method=who.method if who else self.auth.mode
        )
        error = "insufficient_scope" if status == 403 else "invalid_token"
        parts = [f'resource_metadata="{self.metadata_url(scope)}"', f'scope="{wanted}"']
        if status == 403 or refusal.reason != "missing_token":  # RFC 6750 §3.1: no error code when no token came
            parts += [f'error="{error}"', f'error_description="{_quoted(refusal.description)}"']
        header = "Bearer " + ", ".join(parts)
        await self._send_json(
            send, status, {"error": error, "error_description": refusal.description}, [(b"www-authenticate", header)]
        )

    async def _too_many(self, scope: Scope, send: Send, refusal: Refusal, who: Principal) -> None:
        """429 with ``Retry-After`` (whole seconds, rounded up); the body is a JSON-RPC error naming the limit,
        which an MCP client hands its caller as the call's error (it sets the id null: not read here)."""
        self.metrics.refused(refusal.reason)
        action = f"http {scope.get('method', '?')} {scope.get('path', '?')}"
        await self.auditor.record(who.actor, action, "refused", principal=who, reason=refusal.reason, method=who.method)
        wait_s = refusal.retry_after_s or 0.0
        error = {"code": RATE_LIMITED, "message": refusal.description, "data": {"retry_after_s": round(wait_s, 3)}}
        retry = str(max(1, math.ceil(wait_s)))
        await self._send_json(send, 429, {"jsonrpc": "2.0", "id": None, "error": error}, [(b"retry-after", retry)])

    @staticmethod
    async def _send_json(send: Send, status: int, body: object, extra: Sequence[tuple[bytes, str]] = ()) -> None:
        data = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        headers += [(k, v.encode("latin-1", "replace")) for k, v in extra]
        headers.append((b"cache-control", b"no-store"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})


#: Typographic characters a message may hold, as the ASCII a header can carry (anything else: ``?``).
_ASCII_FOR = str.maketrans({"…": "...", "—": "-", "–": "-", "‘": "'", "’": "'", "“": "'", "”": "'", '"': "'"})


def _quoted(text: str) -> str:
    """Text safe inside a quoted-string of a header: no quotes, backslashes or non-ASCII."""
    return text.replace("\\", "").translate(_ASCII_FOR).encode("ascii", "replace").decode()


def _is_viewer_page(path: str) -> bool:
    """``/ui`` and its pages (``/ui/runs/…``, ``/ui/sessions/…``): the run viewer's static HTML. Not
    ``/ui/artifacts/…``: an artifact's bytes are data, checked like ``/mcp`` (``rath_mcp.apps.downloads``)."""
    return (path == "/ui" or path.startswith("/ui/")) and not path.startswith("/ui/artifacts/")
