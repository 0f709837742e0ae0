"""Real ``rath-mcp serve`` subprocesses on 127.0.0.1 for the transport tests, and clients for them.

Servers are started as ``sys.executable -m rath_mcp serve ...`` (the same thing a host runs) with
``--port 0``, each with its own home: the server binds a port the kernel picks and, once it listens,
says which on stderr. Its stderr goes to a file (so a failing test can show what the server said),
and readiness is a bounded poll of that file for the line (another process gives us no event to wait
on). A port picked here and closed again before the server binds it could be taken meanwhile by any
other socket on the machine, and a poll of it could then reach another process's listener. The
process is always terminated, also when a test fails.
"""

from __future__ import annotations

import itertools
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.abc import Process
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters

from rath_mcp.server import build_server
from runtime import Runtime

Transport = Literal["memory", "stdio", "http", "sse"]
Wire = Literal["stdio", "http", "sse"]
Era = Literal["legacy", "2026-07-28"]
TRANSPORTS: tuple[Transport, ...] = ("memory", "stdio", "http", "sse")
ERAS: tuple[Era, ...] = ("legacy", "2026-07-28")
READY_TIMEOUT_S = 30.0  # a bound on how long a server may take to say where it listens, never a measurement
ANNOUNCED = re.compile(r"^rath-mcp: serving MCP over .* on http://\S+:(\d+)/", re.MULTILINE)
_logs = itertools.count()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now: for a client that must find no server
    there, never one to serve on (any socket on the machine may take it before a server binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve_command(transport: Wire, home: Path, port: int | None = None, *extra: str) -> list[str]:
    """The argv of ``rath-mcp serve`` for this transport (no port for stdio)."""
    argv = [sys.executable, "-m", "rath_mcp", "serve", "--transport", transport, "--home", str(home)]
    if port is not None:
        argv += ["--host", "127.0.0.1", "--port", str(port)]
    return argv + list(extra)


@dataclass
class RunningServer:
    """An HTTP or SSE server process and where to reach it."""

    process: Process
    port: int
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


async def _announced_port(process: Process, log: Path) -> int:
    """The port the server says it listens on (it says so once it does); fail early if the process died."""
    said = anyio.Path(log)
    with anyio.fail_after(READY_TIMEOUT_S):
        while True:
            exited = process.returncode is not None  # before reading: once it has ended, the file holds all it said
            if found := ANNOUNCED.search(text := await said.read_text(errors="replace")):
                return int(found.group(1))
            if exited:
                raise AssertionError(f"rath-mcp serve exited with {process.returncode}:\n{text[-4000:]}")
            await anyio.sleep(0.05)


async def _stop(process: Process) -> None:
    """Terminate, then kill if it does not exit in 5 s; shielded so a cancelled test still cleans up."""
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.terminate()
            with anyio.move_on_after(5):
                await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


@asynccontextmanager
async def http_server(transport: Literal["http", "sse"], home: Path, *extra: str) -> AsyncIterator[RunningServer]:
    """``rath-mcp serve --transport http|sse --port 0`` on 127.0.0.1, for the life of the block, once it
    has said which port it listens on."""
    log = home.parent / f"serve-{transport}-{next(_logs)}.log"
    with log.open("wb") as err:
        process = await anyio.open_process(
            serve_command(transport, home, 0, *extra),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            yield RunningServer(process, await _announced_port(process, log), log)
        finally:
            await _stop(process)


def client_for(
    transport: Transport, era: Era, home: Path, server: RunningServer | None = None, **kwargs: Any
) -> Client:
    """A Python SDK client speaking ``era`` over ``transport`` ('legacy' = the initialize handshake)."""
    target: Any
    if transport == "memory":
        raise ValueError("an in-memory client needs the server object; use connected()")
    if transport == "stdio":
        argv = serve_command("stdio", home)
        target = StdioServerParameters(command=argv[0], args=argv[1:])
    elif server is None:
        raise ValueError(f"a {transport} client needs a running server")
    elif transport == "http":
        target = f"{server.base}/mcp"
    else:
        target = sse_client(f"{server.base}/sse")
    return Client(target, mode=era, **kwargs)


def connected(transport: Transport, era: Era, home: Path, **kwargs: Any) -> AbstractAsyncContextManager[Client]:
    """A connected client over ``transport``, starting (and later stopping) the server it needs."""

    @asynccontextmanager
    async def connect() -> AsyncIterator[Client]:
        if transport == "memory":  # the server in this process, the SDK's in-memory transport
            async with Runtime.open(home) as rt, Client(build_server(rt), mode=era, **kwargs) as client:
                yield client
            return
        if transport == "stdio":
            async with client_for("stdio", era, home, **kwargs) as client:
                yield client
            return
        async with http_server(transport, home) as server, client_for(transport, era, home, server, **kwargs) as client:
            yield client

    return connect()
