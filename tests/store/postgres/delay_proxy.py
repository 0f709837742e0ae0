"""A TCP proxy that adds latency: every chunk it carries, either way, is passed on ``delay`` seconds after
it arrived. This kernel has no ``netem`` qdisc, so this is how a test or bench puts a network's delay
between worker hosts (network namespaces, ``netns.py``) and PostgreSQL.

Chunks are not serialized behind each other's delay: each is stamped when read and written once its
time has come, so the proxy adds latency, not a bandwidth limit, and keeps each direction's order.

It runs as a process of its own (``start`` below; ``python -m tests.store.postgres.delay_proxy``), so
its event loop competes with neither the test's nor the bench's: one ``--listen HOST:PORT:DELAY_MS``
per address (port 0: any free one), all forwarding to ``--target``. It prints one line per listener,
``HOST PORT DELAY_MS``, then ``ready``, and serves until stdin closes or it is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import Process

ROOT = Path(__file__).resolve().parents[3]


async def _carry(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy ``reader`` to ``writer``, each chunk ``delay`` seconds after it was read; EOF passed on last."""
    loop = asyncio.get_running_loop()
    queue: deque[tuple[float, bytes]] = deque()
    arrived = asyncio.Event()
    done = False

    async def read() -> None:
        nonlocal done
        try:
            while data := await reader.read(65536):
                queue.append((loop.time() + delay, data))
                arrived.set()
        finally:
            done = True
            arrived.set()

    reading = asyncio.ensure_future(read())
    try:
        while True:
            if not queue:
                if done:
                    break
                arrived.clear()
                await arrived.wait()
                continue
            due, data = queue.popleft()
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            while queue and queue[0][0] <= loop.time():  # whatever else is due goes in the same write
                data += queue.popleft()[1]
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    finally:
        reading.cancel()
        with contextlib.suppress(BaseException):
            await reading


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _handler(target: tuple[str, int], delay: float) -> Handler:
    """Serve one client: connect to ``target``, carry both ways with the delay, until both ways end
    (or one fails: then both are cut)."""

    async def connection(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*target)
        except OSError:
            client_w.transport.abort()
            return
        ways = [asyncio.ensure_future(_carry(client_r, server_w, delay))]
        ways.append(asyncio.ensure_future(_carry(server_r, client_w, delay)))
        with contextlib.suppress(Exception):
            await asyncio.wait(ways, return_when=asyncio.FIRST_EXCEPTION)
        for way in ways:
            way.cancel()
        for writer in (client_w, server_w):
            writer.transport.abort()
        await asyncio.gather(*ways, return_exceptions=True)

    return connection


async def _main(target: tuple[str, int], listens: Sequence[tuple[str, int, float]]) -> None:
    servers = []
    for host, port, delay_ms in listens:
        server = await asyncio.start_server(_handler(target, delay_ms / 1000), host, port)
        servers.append(server)
        print(host, server.sockets[0].getsockname()[1], delay_ms, flush=True)
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes stdin (or goes away)
    for server in servers:
        server.close()


@dataclass(frozen=True)
class Listener:
    host: str
    port: int
    delay_ms: float


@asynccontextmanager
async def start(
    listens: Sequence[tuple[str, float]], target: tuple[str, int] = ("127.0.0.1", 5432)
) -> AsyncIterator[list[Listener]]:
    """A proxy process listening on each ``(host, delay_ms)`` (a free port each), for the life of the block."""
    command = [sys.executable, "-m", "tests.store.postgres.delay_proxy", "--target", f"{target[0]}:{target[1]}"]
    command += [arg for host, delay in listens for arg in ("--listen", f"{host}:0:{delay}")]
    process: Process = await anyio.open_process(command, cwd=ROOT, stdin=subprocess.PIPE, stderr=None)
    try:
        assert process.stdout is not None
        text, found = "", []
        with anyio.fail_after(30):
            while not text.endswith("ready\n"):
                chunk = await process.stdout.receive()
                text += chunk.decode()
        for line in text.splitlines()[:-1]:
            host, port, delay = line.split()
            found.append(Listener(host, int(port), float(delay)))
        yield found
    finally:
        with anyio.CancelScope(shield=True):
            process.kill()
            await process.wait()


def _listen(text: str) -> tuple[str, int, float]:
    host, port, delay = text.rsplit(":", 2)
    return host, int(port), float(delay)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", default="127.0.0.1:5432", help="HOST:PORT every connection is carried to")
    parser.add_argument("--listen", type=_listen, action="append", required=True, help="HOST:PORT:DELAY_MS")
    args = parser.parse_args(argv)
    host, port = args.target.rsplit(":", 1)
    asyncio.run(_main((host, int(port)), args.listen))


if __name__ == "__main__":
    main(sys.argv[1:])
