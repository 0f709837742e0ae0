"""A TCP proxy that adds latency: every chunk it carries, either way, is passed on ``delay`` seconds after
it arrived. This kernel has no ``netem`` qdisc, so this is how a test or bench puts a network's delay
between worker hosts (network namespaces, ``netns.py``) and PostgreSQL.

Chunks are not serialized behind each other's delay: each is stamped when it arrives and written once
its time has come (with any others then due), so the proxy adds latency, not a bandwidth limit, and
keeps each direction's order. A side that closes closes the other, after the delay.

It runs as a process of its own (``start`` below; ``python -m tests.store.postgres.delay_proxy``), so
its event loop competes with neither the test's nor the bench's: one ``--listen HOST:PORT:DELAY_MS``
per address (port 0: any free one), all forwarding to ``--target``. It prints one line per listener,
``HOST PORT DELAY_MS``, then ``ready``, and serves until stdin closes or it is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import Process

ROOT = Path(__file__).resolve().parents[3]


CLOSE = None  # in a way's queue: the source closed (EOF or lost); close the target once it is due


class _Way:
    """One direction of a connection: what arrives from one side is written to the other ``delay`` seconds
    later. Callbacks and one timer at a time, no task per chunk: the proxy's own CPU stays small beside
    what it carries (it shares the machine's cores with what is measured)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        self.loop, self.delay = loop, delay
        self.target: asyncio.Transport | None = None  # set once both sides are connected
        self.queue: deque[tuple[float, bytes | None]] = deque()
        self.timer: asyncio.TimerHandle | None = None

    def put(self, data: bytes | None) -> None:
        self.queue.append((self.loop.time() + self.delay, data))
        if self.timer is None and self.target is not None:
            if self.delay <= 0:
                self._flush()
            else:
                self.timer = self.loop.call_at(self.queue[0][0], self._flush)

    def connect(self, target: asyncio.Transport) -> None:
        self.target = target
        self._flush()

    def _flush(self) -> None:
        """Write every chunk that is due, in order, as one write; then wait for the next one's time."""
        self.timer = None
        assert self.target is not None
        now, due = self.loop.time(), bytearray()
        while self.queue and self.queue[0][0] <= now:
            data = self.queue.popleft()[1]
            if data is CLOSE:
                if due and not self.target.is_closing():
                    self.target.write(bytes(due))
                self.target.close()
                self.queue.clear()
                return
            due += data
        if due and not self.target.is_closing():
            self.target.write(bytes(due))
        if self.queue:
            self.timer = self.loop.call_at(self.queue[0][0], self._flush)


class _Side(asyncio.Protocol):
    """One end of a proxied connection: what it receives goes into ``way`` (towards the other end)."""

    def __init__(self, way: _Way) -> None:
        self.way = way

    def data_received(self, data: bytes) -> None:
        self.way.put(data)

    def eof_received(self) -> None:
        self.way.put(CLOSE)  # PostgreSQL's protocol has no use for half-closed: the other end closes too

    def connection_lost(self, exc: Exception | None) -> None:
        self.way.put(CLOSE)


class _Client(_Side):
    """The accepted end: connects to the target, then both ways flow (the client's first bytes wait)."""

    def __init__(self, target: tuple[str, int], delay: float) -> None:
        self.loop = asyncio.get_running_loop()
        super().__init__(_Way(self.loop, delay))
        self.back = _Way(self.loop, delay)
        self.target = target
        self.connecting: asyncio.Task[None] | None = None  # held: the loop keeps only a weak reference

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.connecting = self.loop.create_task(self._connect(transport))

    async def _connect(self, client: asyncio.Transport) -> None:
        try:
            upstream, _ = await self.loop.create_connection(lambda: _Side(self.back), *self.target)
        except OSError:
            client.abort()
            return
        self.way.connect(upstream)
        self.back.connect(client)


async def _main(target: tuple[str, int], listens: Sequence[tuple[str, int, float]]) -> None:
    servers = []
    for host, port, delay_ms in listens:
        server = await asyncio.get_running_loop().create_server(partial(_Client, target, delay_ms / 1000), host, port)
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
