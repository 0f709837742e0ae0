"""``GET /ui/artifacts/{artifact_id}``: an artifact's bytes, for the viewer's download links.

The route sits beside ``/ui`` on the HTTP transports, but unlike the viewer's page (static, the same
for everyone) it holds data, so the auth gate checks its bearer token like ``/mcp``'s
(``rath_mcp.auth.gate``). The caller needs ``artifact.read``, and sees only its own tenant/project:
another scope's artifact is the same 404, in the same words, as an id that never existed.

The bytes are streamed from the artifact store in pieces (never the whole content in memory), as an
attachment under the artifact's name: a browser saves them rather than showing them, and the
``sandbox`` policy keeps any HTML among them from running as this origin's page.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from mcp.server import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from rath_mcp.principal import Principal, principal_of
from runtime import Runtime
from runtime.errors import InvalidInputError, NotFoundError

DOWNLOAD_PATH = "/ui/artifacts/{artifact_id}"
GRANT = "artifact.read"


def install(server: MCPServer, rt: Runtime, local: Principal) -> None:
    """Serve ``DOWNLOAD_PATH`` on ``server``'s HTTP apps; ``local`` is the caller where no gate ran."""

    async def download(request: Request) -> Response:
        return await artifact_response(rt, principal_of(request, local), request.path_params["artifact_id"])

    add: Any = server.custom_route(DOWNLOAD_PATH, methods=["GET"], include_in_schema=False)  # the SDK's is untyped
    add(download)


async def artifact_response(rt: Runtime, caller: Principal, artifact_id: str) -> Response:
    if not caller.allows(GRANT):
        return _error(
            403,
            "insufficient_scope",
            f"downloading an artifact needs the grant '{GRANT}', which this caller does not hold; "
            f"use a token that carries {GRANT} (or admin)",
        )
    try:
        with rt.scope(caller.tenant, caller.project):
            artifact, pieces = await rt.artifacts.stream(artifact_id)
    except NotFoundError as exc:
        return _error(404, "not_found", str(exc))
    except InvalidInputError as exc:  # a token naming an impossible scope serves nothing
        return _error(403, "invalid_scope", f"this caller's scope is not valid: {exc}")
    headers = {
        "Content-Length": str(artifact.size),
        "Content-Disposition": attachment(artifact.name),
        "Content-Security-Policy": "sandbox; default-src 'none'",
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-store",
        "Referrer-Policy": "no-referrer",
    }
    return StreamingResponse(pieces, media_type=artifact.mime_type, headers=headers)


def attachment(name: str) -> str:
    """``Content-Disposition`` for ``name``: an ASCII fallback and the exact name (RFC 6266, RFC 5987)."""
    fallback = "".join(c if c.isascii() and c.isprintable() and c not in '"\\;' else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def _error(status: int, error: str, description: str) -> Response:
    return JSONResponse({"error": error, "error_description": description}, status_code=status)
