"""Wake-ups across processes through PostgreSQL's LISTEN/NOTIFY, with polling as the fallback.

A writer calls ``notify(conn, channel, payload)`` inside its write transaction. Inside
``PostgresDatabase.write`` the notification is held and sent only once that write has committed
(a write rolled back, or its savepoint in a group-committed batch, sends nothing): right after the
commit, in the same round trip (``commit_sending``), in a short transaction of its own that does not
wait for the WAL flush. Why not inside the
write: PostgreSQL serializes the commits of every transaction that NOTIFYs behind one cluster-wide
lock held through its WAL flush, so notifying inside durable writes limits the whole cluster to one
commit per fsync whatever the number of processes (bench/scale.py measured 58 steps/s with four
workers against 50 with one before; see the README). Elsewhere (a bare connection) it is sent with
that connection's transaction. Listeners get it within a millisecond or so; the order of two
writers' notifications may differ from their commit order, which no listener relies on (each looks
at the state again). A notification lost when a process dies between its commit and the send is
what the polling fallback is for.

``Notifier`` holds one dedicated listening connection per process and hands what arrives to the
in-process subscribers of each channel. Notifications sent while it is not connected are lost
(PostgreSQL queues them only for connections already listening), so when it connects again it
tells every subscriber so with a ``Notification`` whose ``payload`` is None: something may have
been missed, look at the state again. Subscribers wait with a timeout (``Subscription.wait``), and
re-checking on timeout is the polling fallback for everything the notifier cannot see: a server
down, a network that drops silently between two heartbeats.

The usual shape of a waiter: subscribe first, then check the state, then wait, then check again.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import asyncpg

from runtime.errors import StoreError
from runtime.store.postgres.faults import CONNECT_TIMEOUT_S, is_connection_lost, safe_location

MAX_PAYLOAD = 7999  # PostgreSQL refuses a payload of 8000 bytes or more
HEARTBEAT_S = 5.0  # a listening connection idle this long is asked whether it is still there
_BACKLOG = 1000  # notifications a slow subscriber may have unread before they collapse into one resync


@dataclass(frozen=True)
class Notification:
    channel: str
    payload: str | None  # None: the listener (re)connected, notifications may have been missed


_OUTBOX: contextvars.ContextVar[list[tuple[str, str]] | None] = contextvars.ContextVar("rath_outbox", default=None)


async def notify(conn: asyncpg.Connection, channel: str, payload: str = "") -> None:
    """Send ``payload`` on ``channel`` once the write ``conn`` is in commits (see the module's doc)."""
    if len(payload.encode()) > MAX_PAYLOAD:
        raise StoreError(f"a notification payload is at most {MAX_PAYLOAD} bytes; send an id and read the rest")
    if "\0" in channel or "\0" in payload:
        raise StoreError("a notification's channel and payload hold no NUL character")
    held = _OUTBOX.get()
    if held is not None:
        held.append((channel, payload))
        return
    await conn.execute("SELECT pg_notify($1, $2)", channel, payload)


@contextlib.contextmanager
def holding() -> Iterator[list[tuple[str, str]]]:
    """Within the block, ``notify`` collects into the list it yields instead of sending (``PostgresDatabase``)."""
    held: list[tuple[str, str]] = []
    token = _OUTBOX.set(held)
    try:
        yield held
    finally:
        _OUTBOX.reset(token)


def commit_sending(held: Sequence[tuple[str, str]]) -> str:
    """The COMMIT of a write transaction, with the notifications held for it sent right after it in the same
    round trip: a second statement of the same query string, so in a transaction of its own that begins
    once the COMMIT has returned and does not wait for a flush. (A query string of several statements
    takes no parameters: channels and payloads are written as escape-string literals, which read the
    same whatever ``standard_conforming_strings`` says.)"""
    if not held:
        return "COMMIT"
    rows = ", ".join(f"({_literal(channel)}, {_literal(payload)})" for channel, payload in dict.fromkeys(held))
    return (
        f"COMMIT; SELECT set_config('synchronous_commit', 'off', true), pg_notify(c, p) FROM (VALUES {rows}) AS n(c, p)"
    )


def _literal(text: str) -> str:
    """``text`` as a PostgreSQL escape-string literal (``notify`` refuses NUL, which none may hold)."""
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


class Subscription:
    """Notifications of one channel, for one waiter, taken with ``wait``."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self._queue: collections.deque[Notification] = collections.deque()
        self._arrived = anyio.Event()

    def _push(self, note: Notification) -> None:
        if len(self._queue) >= _BACKLOG:
            self._queue.clear()
            note = Notification(self.channel, None)
        self._queue.append(note)
        self._arrived.set()

    async def wait(self, timeout: float | None = None) -> list[Notification]:
        """Everything that arrived since the last call, waiting up to ``timeout`` seconds for the first;
        ``[]`` when the time ran out (check the state anyway: that is the polling fallback)."""
        if not self._queue:
            with anyio.move_on_after(timeout):
                await self._arrived.wait()
        out = list(self._queue)
        self._queue.clear()
        self._arrived = anyio.Event()
        return out


class Notifier:
    """One listening connection per process, reconnecting, fanning notifications out to subscribers.

    Run it in the owner's task group (``await tg.start(notifier.run)``); ``close()`` ends it.
    """

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.where = safe_location(dsn)
        self._subs: dict[str, set[Subscription]] = collections.defaultdict(set)
        self._conn: asyncpg.Connection | None = None
        self._lock = anyio.Lock()  # one operation at a time on the listening connection
        self._lost = anyio.Event()
        self._scope: anyio.CancelScope | None = None

    @property
    def server_pid(self) -> int | None:
        """The listening connection's backend (None while not connected)."""
        return None if self._conn is None else int(self._conn.get_server_pid())

    @contextlib.asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[Subscription]:
        """Notifications on ``channel`` from now on (LISTEN is in place when this returns, if connected)."""
        sub = Subscription(channel)
        first = not self._subs[channel]
        self._subs[channel].add(sub)
        try:
            if first:
                await self._listen(channel)
            yield sub
        finally:
            self._subs[channel].discard(sub)
            if not self._subs[channel]:
                del self._subs[channel]
                with anyio.CancelScope(shield=True):
                    await self._unlisten(channel)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Stay connected (reconnecting with backoff) until ``close``; started after the first attempt."""
        delay = 0.05
        with anyio.CancelScope() as self._scope:
            started = False
            while True:
                try:
                    await self._connect()
                    delay = 0.05
                except Exception as exc:
                    if not is_connection_lost(exc):
                        raise StoreError(f"could not listen for notifications on {self.where}: {exc}") from exc
                if not started:
                    task_status.started()
                    started = True
                if self._conn is None:
                    await anyio.sleep(delay)  # the server is not there: try again, less and less often
                    delay = min(delay * 2, 2.0)
                    continue
                await self._stay_connected()

    def close(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    async def _connect(self) -> None:
        conn = await asyncpg.connect(
            self.dsn, timeout=CONNECT_TIMEOUT_S, server_settings={"application_name": "rath-mcp-listener"}
        )
        self._lost = anyio.Event()
        conn.add_termination_listener(lambda _c: self._lost.set())
        try:
            async with self._lock:  # a subscriber arriving meanwhile LISTENs once this is set
                for channel in list(self._subs):
                    await conn.add_listener(channel, self._deliver)
                self._conn = conn
        except BaseException:
            conn.terminate()
            raise
        for channel, subs in list(self._subs.items()):  # anything sent while we were away is lost: say so
            for sub in list(subs):
                sub._push(Notification(channel, None))

    async def _stay_connected(self) -> None:
        conn = self._conn
        assert conn is not None
        try:
            while not self._lost.is_set():
                with anyio.move_on_after(HEARTBEAT_S):
                    await self._lost.wait()
                if self._lost.is_set():
                    break
                async with self._lock:  # a heartbeat: a connection dropped silently shows up here
                    with anyio.fail_after(HEARTBEAT_S):
                        await conn.execute("SELECT 1")
        except Exception as exc:
            if not (is_connection_lost(exc) or isinstance(exc, TimeoutError)):
                raise
        finally:
            self._conn = None
            conn.terminate()

    def _deliver(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        for sub in list(self._subs.get(channel, ())):
            sub._push(Notification(channel, payload))

    async def _listen(self, channel: str) -> None:
        async with self._lock:
            if (conn := self._conn) is not None:
                with contextlib.suppress(Exception):  # lost meanwhile: the reconnect LISTENs again
                    await conn.add_listener(channel, self._deliver)

    async def _unlisten(self, channel: str) -> None:
        async with self._lock:
            if (conn := self._conn) is not None and not conn.is_closed():
                with contextlib.suppress(Exception):
                    await conn.remove_listener(channel, self._deliver)
