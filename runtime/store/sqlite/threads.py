"""Threads that each own one SQLite connection and run whole functions on it, for the event loop.

``SQLiteDatabase`` (``database.py``) keeps its writer and its readers here: a caller hands a
function over and awaits its result, one hop per transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from runtime.errors import StoreError

T = TypeVar("T")


class _Job:
    """A function for a connection's thread, and how its caller learns the outcome.

    ``future`` is what the caller awaits. A job that must finish (``finish``) runs even when its
    caller was cancelled meanwhile; the caller then waits on a fresh ``future`` until ``done``.
    """

    __slots__ = ("done", "finish", "fn", "future", "loop")

    def __init__(self, fn: Callable[[sqlite3.Connection], Any], loop: asyncio.AbstractEventLoop, finish: bool) -> None:
        self.fn = fn
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.finish = finish
        self.done = False


def _settle(job: _Job, result: Any, error: BaseException | None) -> None:
    job.done = True
    future = job.future
    if future.done():  # its caller was cancelled and stopped waiting
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class ConnectionThreads:
    """Threads that each own one connection and run the functions put on their shared queue.

    A hop is one queue put and one ``call_soon_threadsafe``: a third of what ``anyio.to_thread``
    costs here (about 35 against 100 microseconds), which is a tenth of a whole tool call. The
    caller awaits the job's own future directly, even for a job that must finish (no
    ``asyncio.shield``, whose extra future costs an event-loop pass on every commit).
    """

    def __init__(self, name: str, connections: list[sqlite3.Connection]) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._stopped = False
        self._threads = [
            threading.Thread(target=self._serve, args=(conn,), name=f"{name}-{i}", daemon=True)
            for i, conn in enumerate(connections)
        ]
        for thread in self._threads:
            thread.start()

    async def run(self, fn: Callable[[sqlite3.Connection], T], *, finish: bool = False) -> T:
        """``fn(conn)`` on one of the threads.

        A cancelled caller stops waiting, and a job it leaves that has not started is dropped. With
        ``finish`` the job always runs and the caller waits for it even when cancelled, then lets the
        cancellation go on: for a commit, whose writers must learn how it ended.
        """
        if self._stopped:
            raise StoreError("the database is closed")
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise StoreError("the SQLite store needs asyncio (anyio's default backend) to run on") from None
        job = _Job(fn, loop, finish)
        self._jobs.put(job)
        if not finish:
            return await job.future  # type: ignore[no-any-return]
        try:
            return await job.future  # type: ignore[no-any-return]
        except asyncio.CancelledError:
            # The cancel cancelled only the future we awaited: the job stays wanted and runs. Wait it
            # out on fresh futures (no re-delivered anyio cancel meanwhile), then let the cancel go on.
            with anyio.CancelScope(shield=True):
                while not job.done:
                    job.future = loop.create_future()
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait([job.future])  # returns when done, whatever the job raised
                    if job.future.done() and not job.future.cancelled():
                        job.future.exception()  # seen: the cancellation is what the caller gets
            raise

    async def close(self) -> None:
        """Refuse new work and fail work not yet started; a job already running finishes, then each
        thread closes its connection and ends; returns once they all have."""
        self._stopped = True
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            await anyio.to_thread.run_sync(thread.join)

    def _serve(self, conn: sqlite3.Connection) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                if not job.finish and job.future.cancelled():  # its caller stopped waiting before it started
                    continue
                result: Any = None
                error: BaseException | None = None
                if self._stopped:
                    error = StoreError("the database is closed")
                else:
                    try:
                        result = job.fn(conn)
                    except BaseException as exc:
                        error = exc
                    if self._stopped:  # closed while this ran: close the connection before the caller resumes
                        conn.close()
                try:
                    job.loop.call_soon_threadsafe(_settle, job, result, error)
                except RuntimeError:  # the event loop is gone: nobody is waiting
                    pass
                # Drop this job's references now: kept until the next job, a large result would stay
                # in memory while idle and its freeing would be charged to whoever comes next.
                del job, result, error
        finally:
            conn.close()
