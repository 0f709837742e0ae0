"""A TCP proxy in front of the real PostgreSQL that can cut connections at chosen points of the wire.

The faults tests point a database at it instead of at 5432: the bytes are PostgreSQL's own, and the
proxy only decides when to stop carrying them. It recognises the simple-protocol query that commits
(``Q``, length, ``COMMIT`` alone or followed by the notifications sent with it) so a test can lose
the connection exactly before the server sees the commit, or exactly after the server has answered
it (the ambiguous case).
It can also refuse connections altogether (a server that is down) and accept them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Literal
from urllib.parse import parse_qs, urlsplit

#: A simple query that commits: "COMMIT" alone, or with the notifications sent after it ("COMMIT; SELECT …").
COMMIT = re.compile(rb"Q[\x00-\xff]{4}COMMIT[;\x00]")
Mode = Literal["pass", "cut_before_commit", "cut_after_commit"]


class Proxy:
    def __init__(self, target: tuple[str, int] = ("127.0.0.1", 5432)) -> None:
        self.target = target
        self.port = 0
        self.mode: Mode = "pass"
        self.cuts = 0
        self.refuse_after_cut = False  # after a cut, also go down (so the outcome cannot be asked)
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def url(self, database: str, **params: str) -> str:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}" + (f"?{query}" if query else "")

    def in_front_of(self, pg_url: str) -> str:
        """``pg_url`` (a test database and its schema) reached through this proxy."""
        parts = urlsplit(pg_url)
        return self.url(parts.path.lstrip("/"), search_path=parse_qs(parts.query)["search_path"][0])

    async def refuse(self) -> None:
        """Stop accepting and drop every connection: the server looks down."""
        if self._server is not None:
            self._server.close()
            self._server = None
        self.cut_all()

    async def accept(self) -> None:
        """Accept connections again, on the same port (the server is back)."""
        await self.start()

    def cut_all(self) -> None:
        for writer in list(self._conns):
            writer.transport.abort()
        self._conns.clear()

    async def close(self) -> None:
        await self.refuse()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.transport.abort()
            return
        self._conns.update((client_w, server_w))
        cut = asyncio.Event()
        swallow = False  # the next answer from the server is COMMIT's: do not pass it on

        async def upstream() -> None:
            nonlocal swallow
            while data := await client_r.read(65536):
                if COMMIT.search(data) and self.mode == "cut_before_commit":
                    self.mode, self.cuts = "pass", self.cuts + 1
                    cut.set()
                    return
                if COMMIT.search(data) and self.mode == "cut_after_commit":
                    self.mode, self.cuts = "pass", self.cuts + 1
                    swallow = True
                    server_w.write(data)
                    await server_w.drain()
                    await cut.wait()  # downstream saw the server answer COMMIT: it has committed
                    if self.refuse_after_cut and self._server is not None:
                        self._server.close()
                        self._server = None
                        self.cut_all()
                    return
                server_w.write(data)
                await server_w.drain()

        async def downstream() -> None:
            while not cut.is_set() and (data := await server_r.read(65536)):
                if swallow:
                    cut.set()
                    return
                client_w.write(data)
                await client_w.drain()

        tasks = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        with contextlib.suppress(Exception):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for writer in (client_w, server_w):
            writer.transport.abort()
            self._conns.discard(writer)
        with contextlib.suppress(BaseException):
            await asyncio.gather(*tasks, return_exceptions=True)
