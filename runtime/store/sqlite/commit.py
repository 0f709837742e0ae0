"""How ``SQLiteDatabase`` commits writes: a batch of them in one transaction, and where a lone one commits.

A *batch* is every write queued while the writer was busy, run in one ``BEGIN IMMEDIATE`` transaction,
each under its own SAVEPOINT (so one failing write rolls back alone), and committed with one fsync
(group commit). A batch of one needs no savepoint: its failure rolls the transaction back.

Most writes go to the writer's thread, so the event loop serves other work during the fsync. But a
thread hop costs two thread wake-ups, measured 100 to 300 microseconds on these machines: as much as the
commit itself. For a caller that writes alone (one agent's run, step after step; a request that forks a
session) the hop is most of what a write costs. ``InlineGate`` says when a *small* write may instead
commit right on the event loop's thread: when no other write is waiting or running, when the last commit
was of one write and the task that made it is this one or has ended (so no other task is about to write,
whose write would otherwise have shared this fsync), when commits here are cheap (a slow disk's fsync
would hold the loop up too long; then the hop costs comparatively little), and when no WAL checkpoint is
due. A checkpoint copies the WAL back into the database, milliseconds of I/O: the writer's connection
does not checkpoint on commit (``wal_autocheckpoint=0``); a batch on the writer's thread does, when one
is due. Writes committed here give the loop a pass (yield once), so that the tasks they held up run,
and any that write show as writers: the next write of the same task then sees a batch under way
instead of committing here.

That pass is not given after every such commit: a pass costs about as much as the rest of a no-op step
(resuming the writer's task back down its chain of awaits, a poll of the selector), and a run whose
steps never wait would pay it at every step. The gate gives one once the loop has gone ``LOOP_PASS_S``
without one from here: no longer than one costly commit already holds it (``INLINE_COST_S``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio

from runtime.errors import StoreError
from runtime.store.sqlite import health

T = TypeVar("T")

#: Rows changed on the writer's connection between WAL checkpoints (SQLite's own default is 1,000 pages;
#: a small write changes a few rows on about as many pages).
CHECKPOINT_ROWS = 1000
#: Above this (a moving average of recent commits, in seconds), lone writes go to the writer's thread.
INLINE_COST_S = 0.002
#: A task committing here, write after write, gives the event loop a pass at least this often (seconds).
LOOP_PASS_S = INLINE_COST_S
_COST_WEIGHT = 0.125


@dataclass
class Write(Generic[T]):
    """One ``SQLiteDatabase.write``: the function and, once ``done``, its result or error."""

    fn: Any
    result: Any = None
    error: BaseException | None = None
    done: bool = False


class Batch:
    """A batch on its way to the writer. Its event is made for the first writer that waits on it: a lone
    writer's batch has none to make or set."""

    __slots__ = ("_finished",)

    def __init__(self) -> None:
        self._finished: anyio.Event | None = None

    async def wait(self) -> None:
        if self._finished is None:
            self._finished = anyio.Event()
        await self._finished.wait()

    def finish(self) -> None:
        if self._finished is not None:
            self._finished.set()


def begin(conn: sqlite3.Connection, path: Path, items: list[Write[Any]], *, give_way: bool = False) -> bool | None:
    """Start the write transaction: True once started, False when SQLite would not (each write failed);
    with ``give_way``, None when another process holds the write lock (nothing failed: write elsewhere)."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        return True
    except sqlite3.Error as exc:
        if give_way and health.error_code(exc) == sqlite3.SQLITE_BUSY:
            return None
        error = health.store_error(path, exc) or StoreError(f"could not start a write transaction: {exc}")
        for item in items:
            item.error, item.done = error, True
        return False


def commit(conn: sqlite3.Connection, path: Path, items: list[Write[Any]]) -> None:
    """Run ``items`` in the transaction ``begin`` started and commit it; each write ends ``done``."""
    try:
        if len(items) == 1:
            item = items[0]
            try:
                item.result = item.fn(conn)
            except BaseException as exc:
                conn.execute("ROLLBACK")
                item.error = exc
                return
        else:
            for item in items:
                conn.execute("SAVEPOINT w")
                try:
                    item.result = item.fn(conn)
                except BaseException as exc:
                    conn.execute("ROLLBACK TO w")
                    item.error = exc
                conn.execute("RELEASE w")
        conn.execute("COMMIT")
    except BaseException as exc:
        # The transaction is lost (a failed COMMIT, or an error SQLite answered by rolling the
        # whole transaction back, after which ROLLBACK TO fails): end it so the connection
        # stays usable, and fail every write of the batch that had not failed on its own.
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        lost = health.store_error(path, exc) or StoreError(f"the write transaction failed: {exc}")
        for item in items:
            if item.error is None:
                item.result, item.error = None, lost
        if not isinstance(exc, sqlite3.Error):
            raise
    finally:
        for item in items:
            item.done = True


class InlineGate:
    """Whether a small write may commit on the event loop's thread (see the module's text), and the
    bookkeeping that decides it: who wrote last, what commits cost, when a checkpoint is due."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock  # what commit costs and the time between passes are measured with (seconds)
        self._passed_at = clock()  # when a write committed here last gave the loop a pass
        self._last_writer: weakref.ref[asyncio.Task[Any]] | None = None
        self.last_batch = 0  # writes in the last commit: more than one, and writers are about
        self._cost_s = 0.0
        self._checkpointed_at = 0  # the writer connection's total_changes at its last checkpoint

    def allows(self, conn: sqlite3.Connection) -> bool:
        if self.last_batch > 1 or self._cost_s > INLINE_COST_S or self.checkpoint_due(conn):
            return False
        last = self._last_writer() if self._last_writer is not None else None
        return last is None or last.done() or last is asyncio.current_task()

    def pass_due(self) -> bool:
        """Whether a write that just committed here gives the loop a pass now (then counted as given)."""
        at = self.clock()
        if at - self._passed_at < LOOP_PASS_S:
            return False
        self._passed_at = at
        return True

    def wrote(self, writes: int, seconds: float) -> None:
        """This task committed ``writes`` writes (its own and those it led), the transaction taking
        ``seconds`` (on either thread)."""
        task = asyncio.current_task()
        self._last_writer = weakref.ref(task) if task is not None else None
        self.last_batch = writes
        self._cost_s += (seconds - self._cost_s) * _COST_WEIGHT

    def checkpoint_due(self, conn: sqlite3.Connection) -> bool:
        return conn.total_changes - self._checkpointed_at >= CHECKPOINT_ROWS

    def checkpoint(self, conn: sqlite3.Connection) -> None:
        """Copy the WAL back into the database as far as readers allow (PASSIVE: it waits for nobody)."""
        self._checkpointed_at = conn.total_changes
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error:  # another process checkpointing; the next due one tries again
            pass
