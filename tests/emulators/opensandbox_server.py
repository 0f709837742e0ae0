"""A local emulator of the OpenSandbox HTTP API, for driving the unmodified ``opensandbox`` SDK in tests.

The real service runs each sandbox as a container (it needs Docker, which test machines lack). This
emulator speaks the same wire format on 127.0.0.1 and stands each "container" up as a temporary
directory; commands run as local subprocesses with a clean environment.

- lifecycle (``/v1``): ``POST/GET /sandboxes``, ``GET/DELETE /sandboxes/{id}``,
  ``GET /sandboxes/{id}/endpoints/{port}``, and for tests ``GET /_emulator/sandboxes/{id}/requested``
  (the resource limits and egress policy it was created with) (auth header ``OPEN-SANDBOX-API-KEY`` when ``--api-key``);
- execd (at the endpoint it hands out, ``127.0.0.1:PORT/execd/{id}``, which demands the per-sandbox
  ``X-EXECD-ACCESS-TOKEN`` header the endpoint carries): ``/ping``, ``POST /command`` streaming
  execd's bare-JSON SSE frames (``init``, ``stdout``, ``stderr``, then ``execution_complete`` or an
  ``error`` whose ``evalue`` is the exit code; ``-1`` with ``signal: killed`` on timeout),
  ``DELETE /command?id=`` (interrupt), ``/files/upload`` (multipart ``metadata`` + ``file`` pairs),
  ``/files/download``, ``/files/info``, ``DELETE /files``, ``/directories`` and ``/directories/list``.

Sandbox paths are absolute container paths; ``/x/y`` maps to ``<sandbox dir>/x/y`` and anything
resolving outside the sandbox dir is refused, as a container's filesystem would contain it.

Run: ``python -m tests.emulators.opensandbox_server [--api-key KEY]``; it prints ``LISTENING <url>``.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.emulators.opensandbox_execd import execd_routes

EXECD_PORT = 44772
TOKEN_HEADER = "X-EXECD-ACCESS-TOKEN"


def error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status_code=status)


def now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class SandboxState:
    """One emulated container: a directory, its metadata, its running commands."""

    id: str
    root: Path
    image: str
    entrypoint: list[str]
    metadata: dict[str, str]
    token: str
    created_at: str = field(default_factory=now_iso)
    running: dict[str, Any] = field(default_factory=dict)
    requested: dict[str, Any] = field(default_factory=dict)  # the create body, for tests to inspect

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "image": {"uri": self.image},
            "status": {"state": "Running", "lastTransitionAt": self.created_at},
            "metadata": self.metadata,
            "entrypoint": self.entrypoint,
            "createdAt": self.created_at,
        }


class Emulator:
    """State shared by the lifecycle and execd routes."""

    def __init__(self, data_dir: Path, api_key: str | None) -> None:
        self.data_dir = data_dir
        self.api_key = api_key
        self.port = 0
        self.sandboxes: dict[str, SandboxState] = {}

    def authorised(self, request: Request) -> bool:
        return self.api_key is None or request.headers.get("OPEN-SANDBOX-API-KEY") == self.api_key

    def execd_sandbox(self, request: Request) -> SandboxState | JSONResponse:
        sandbox = self.sandboxes.get(request.path_params["sid"])
        if sandbox is None:
            return error(404, "SANDBOX_NOT_FOUND", "no such sandbox")
        if request.headers.get(TOKEN_HEADER) != sandbox.token:
            return error(401, "UNAUTHORIZED", f"missing or wrong {TOKEN_HEADER}")
        return sandbox


def lifecycle_routes(emu: Emulator) -> list[Route]:
    def guarded(handler: Any) -> Any:
        async def wrapper(request: Request) -> Response:
            if not emu.authorised(request):
                return error(401, "UNAUTHORIZED", "missing or wrong OPEN-SANDBOX-API-KEY")
            result: Response = await handler(request)
            return result

        return wrapper

    async def create(request: Request) -> Response:
        body = await request.json()
        image = (body.get("image") or {}).get("uri")
        if not image:
            return error(400, "INVALID_REQUEST", "image.uri is required")
        entrypoint = body.get("entrypoint")
        if not isinstance(entrypoint, list) or not entrypoint:
            return error(400, "INVALID_REQUEST", "entrypoint must be a non-empty list")
        sid = uuid.uuid4().hex[:16]
        root = emu.data_dir / sid
        for sub in ("tmp", "workspace"):
            (root / sub).mkdir(parents=True)
        state = SandboxState(sid, root, image, entrypoint, dict(body.get("metadata") or {}), uuid.uuid4().hex)
        state.requested = {k: body.get(k) for k in ("resourceLimits", "networkPolicy")}
        emu.sandboxes[sid] = state
        payload = {k: v for k, v in state.to_json().items() if k != "image"}
        return JSONResponse(payload, status_code=202)

    async def list_sandboxes(request: Request) -> Response:
        states = {s.lower() for s in request.query_params.getlist("state")}
        wanted = dict(parse_qsl(request.query_params.get("metadata", ""), keep_blank_values=True))
        items = [
            s.to_json()
            for s in emu.sandboxes.values()
            if (not states or "running" in states) and all(s.metadata.get(k) == v for k, v in wanted.items())
        ]
        page_size = int(request.query_params.get("pageSize", "20"))
        page = max(1, int(request.query_params.get("page", "1")))
        chunk = items[(page - 1) * page_size : page * page_size]
        pages = max(1, -(-len(items) // page_size))
        pagination = {
            "page": page,
            "pageSize": page_size,
            "totalItems": len(items),
            "totalPages": pages,
            "hasNextPage": page < pages,
        }
        return JSONResponse({"items": chunk, "pagination": pagination})

    async def get_one(request: Request) -> Response:
        sandbox = emu.sandboxes.get(request.path_params["sid"])
        if sandbox is None:
            return error(404, "SANDBOX_NOT_FOUND", "no such sandbox")
        return JSONResponse(sandbox.to_json())

    async def delete(request: Request) -> Response:
        sandbox = emu.sandboxes.pop(request.path_params["sid"], None)
        if sandbox is None:
            return error(404, "SANDBOX_NOT_FOUND", "no such sandbox")
        for kill in list(sandbox.running.values()):
            kill()
        shutil.rmtree(sandbox.root, ignore_errors=True)
        return Response(status_code=204)

    async def requested(request: Request) -> Response:
        """Emulator only: what a sandbox was created with (limits, egress policy), so tests can check it."""
        sandbox = emu.sandboxes.get(request.path_params["sid"])
        if sandbox is None:
            return error(404, "SANDBOX_NOT_FOUND", "no such sandbox")
        return JSONResponse(sandbox.requested)

    async def endpoint(request: Request) -> Response:
        sandbox = emu.sandboxes.get(request.path_params["sid"])
        if sandbox is None:
            return error(404, "SANDBOX_NOT_FOUND", "no such sandbox")
        port = request.path_params["port"]
        return JSONResponse(
            {
                "endpoint": f"127.0.0.1:{emu.port}/execd/{sandbox.id}" if port == EXECD_PORT else f"127.0.0.1:{port}",
                "headers": {TOKEN_HEADER: sandbox.token},
            }
        )

    return [
        Route("/v1/sandboxes", guarded(create), methods=["POST"]),
        Route("/v1/sandboxes", guarded(list_sandboxes), methods=["GET"]),
        Route("/v1/sandboxes/{sid}", guarded(get_one), methods=["GET"]),
        Route("/v1/sandboxes/{sid}", guarded(delete), methods=["DELETE"]),
        Route("/v1/sandboxes/{sid}/endpoints/{port:int}", guarded(endpoint), methods=["GET"]),
        Route("/v1/_emulator/sandboxes/{sid}/requested", guarded(requested), methods=["GET"]),
    ]


def build_app(emu: Emulator) -> Starlette:
    return Starlette(routes=lifecycle_routes(emu) + execd_routes(emu))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="opensandbox-emu-") as data_dir:
        emu = Emulator(Path(data_dir), args.api_key)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it
        sock.bind((args.host, args.port))
        emu.port = sock.getsockname()[1]
        config = uvicorn.Config(build_app(emu), log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        print(f"LISTENING http://{args.host}:{emu.port}", flush=True)
        server.run(sockets=[sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
