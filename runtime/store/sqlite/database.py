"""The embedded SQLite database every SQLite repository shares.

One writer connection and a few reader connections on one file, WAL mode. Each connection lives
on a thread of its own and runs whole functions sent to it (one hop per transaction, never one
per statement). Writes are *group committed*: concurrent ``write(fn)`` calls are gathered into one
``BEGIN IMMEDIATE`` transaction, run in one hop, each under its own SAVEPOINT (so one failing
write rolls back alone), and committed with one fsync; a small write made alone may commit on the
event loop's thread instead, without a hop (``commit.py`` says when). Per-statement awaits are what
make asyncio SQLite slow (see ARCHITECTURE.md); a whole transaction per hop, and many per fsync, is
what makes it fast.

Several processes may open the same file: SQLite's own lock serialises their writers and
``busy_timeout`` makes them wait instead of failing (on the writer's thread: the loop never waits).

A store that reported damage, whose file was deleted or replaced under it, or that was opened
read-only refuses writes rather than acknowledge one it would lose (``guard.py``); how the file is
opened is ``opening.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from runtime.errors import StoreError
from runtime.scopes import cancel_scope
from runtime.store.migration import Migration
from runtime.store.sqlite import commit, guard, health
from runtime.store.sqlite.commit import Batch, InlineGate, Write
from runtime.store.sqlite.opening import (
    BUSY_TIMEOUT_MS,
    apply_migrations,
    make_directory,
    open_for_reading,
    open_for_writing,
    pending_migrations,
)
from runtime.store.sqlite.threads import ConnectionThreads

T = TypeVar("T")

WriteFn = Callable[[sqlite3.Connection], T]

_LOOKUP_BUSY_TIMEOUT_MS = 20

__all__ = ["SQLiteDatabase", "apply_migrations", "pending_migrations"]


class SQLiteDatabase:
    """A SQLite file opened for the runtime: group-committed writes, pooled reads, migrations.

    ``read_only``: open the file for reading only (``rath-mcp sessions list`` on a home that cannot
    be written); it is neither created nor migrated, and every write is refused saying why.
    """

    def __init__(self, path: Path, *, synchronous: str = "FULL", read_only: bool = False) -> None:
        self.path = path
        self.synchronous = synchronous
        self.read_only = read_only
        self._guard = guard.FileGuard(path)  # whether writes are refused: damage, a vanished file (guard.py)
        self._writer: ConnectionThreads | None = None
        self._readers: ConnectionThreads | None = None
        self._here: sqlite3.Connection | None = None  # used only on the event loop's thread, by lookup()
        self._writer_conn: sqlite3.Connection | None = None  # the writer's, for a lone write on the loop
        self._patient = True  # whether the writer's connection waits for another process's write lock
        self._gate = InlineGate()
        self._write_limiter = anyio.CapacityLimiter(1)
        self._pending: list[Write[Any]] = []
        self._batch: Batch | None = None

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self, migrations: Sequence[Migration]) -> None:
        if self.read_only:
            with health.translated(self.path):
                readers = await anyio.to_thread.run_sync(open_for_reading, self.path, migrations)
            self._guard.refuse(StoreError(guard.read_only_message(self.path, "opened for reading only")))
        else:
            make_directory(self.path)
            with health.translated(self.path):
                writer, readers = await anyio.to_thread.run_sync(
                    open_for_writing, self.path, self.synchronous, migrations
                )
            self._guard.pin()  # the files the connections have open: each commit checks they are still there
            writer.execute("PRAGMA wal_autocheckpoint=0")  # the writer's thread checkpoints (commit.py)
            self._writer_conn = writer
            self._writer = ConnectionThreads("rath-sqlite-writer", [writer])
        self._here = readers.pop()
        self._here.execute(f"PRAGMA busy_timeout={_LOOKUP_BUSY_TIMEOUT_MS}")
        self._readers = ConnectionThreads("rath-sqlite-reader", readers)

    async def close(self) -> None:
        """Close the writer once its batch is done, then the readers once their reads end, then the last connection.

        Only a connection that closes while no other is open checkpoints the WAL and removes ``-wal`` and
        ``-shm``; connections closing at the same moment each see the others and all leave them. So
        every thread's connection is closed (joined) before the loop's own connection closes, alone.
        """
        with anyio.CancelScope(shield=True):
            async with self._write_limiter:
                writer, self._writer = self._writer, None
                self._writer_conn = None
                if writer is not None:
                    await writer.close()
            readers, self._readers = self._readers, None
            if readers is not None:
                await readers.close()
            here, self._here = self._here, None
            if here is not None:
                here.close()

    # -- writes -----------------------------------------------------------------------------
    async def write(self, fn: WriteFn[T], *, small: bool = False) -> T:
        """Run ``fn(conn)`` inside a write transaction and return its result once committed.

        ``fn`` must only use the connection it is given. If it raises, its changes are rolled back
        (and only its changes) and the error is re-raised. It runs on the writer's thread, or, when
        ``small`` (a few rows of modest size, such as a run's step or a session fork) and the write is
        alone, right here on the event loop's thread (``commit.InlineGate``).
        """
        refused = self._guard.refusal()
        if refused is not None:
            raise refused
        item: Write[T] = Write(fn)
        if small and self._commit_here(item):
            if self._gate.pass_due():  # let the tasks this held up run (commit.py); a cancel here is as after a hop
                await asyncio.sleep(0)
            return self._outcome(item)
        self._pending.append(item)
        waited = False
        try:
            while not item.done:
                if self._batch is not None:
                    await self._batch.wait()
                    waited = True
                else:
                    await self._lead_batch(waited)
        except BaseException:
            # not taken yet, or handed back unrun (its leader was torn down): withdraw it, nothing was written
            if item in self._pending:
                self._pending.remove(item)
            raise
        return self._outcome(item)

    def refusal(self) -> StoreError | None:
        """Why writes are refused (damage seen, the file deleted, moved or replaced, a read-only open),
        looking at the files now; None while writes are accepted. For readiness: a stat or two."""
        self._guard.lost()
        return self._guard.refusal()

    def _outcome(self, item: Write[T]) -> T:
        if item.error is not None:
            with self._translated():
                raise item.error
        return item.result  # type: ignore[no-any-return]

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        """Raise an error met on this store as the ``StoreError`` it means, if it is about the file
        (``health.translated``); damage also refuses every later write."""
        try:
            with health.translated(self.path):
                yield
        except StoreError as error:
            self._guard.noticed(error)
            raise

    def _kept(self, items: list[Write[Any]]) -> None:
        """After a commit: fail the writes that went into a file no longer at the store's path (lost)."""
        if self._guard.lost() is not None:
            for item in items:
                if item.error is None:
                    item.result, item.error = None, self._guard.refusal()

    def _commit_here(self, item: Write[Any]) -> bool:
        """Commit a lone write on this thread if the gate allows and the file's write lock is free now;
        False (nothing done) otherwise. It never waits: not for another process's lock, nor a checkpoint."""
        conn = self._writer_conn
        # The writer must be free (a batch or close() would hold the limiter); nothing below awaits, so it stays free.
        if conn is None or self._pending or self._batch is not None or self._write_limiter.borrowed_tokens:
            return False
        if not self._gate.allows(conn):
            return False
        if self._patient:
            conn.execute("PRAGMA busy_timeout=0")
            self._patient = False
        started = self._gate.clock()
        begun = commit.begin(conn, self.path, [item], give_way=True)
        if begun is None:  # another process writes: queue for the writer's thread, which waits
            return False
        if begun:
            commit.commit(conn, self.path, [item])
            self._gate.wrote(1, self._gate.clock() - started)
            self._kept([item])
        return True

    async def _lead_batch(self, waited: bool) -> None:
        """Take every pending write to the writer as one transaction.

        The leader gives the loop one pass before it takes the batch when other writers are likely
        about to write: it ``waited`` for a batch (whose writers just woke), or the last batch
        carried more than one write. Their writes then join this batch instead of waiting for the
        next fsync. A lone writer (the last batch was its own) goes at once: no window to pay.
        """
        batch = self._batch = Batch()
        items: list[Write[Any]] = []
        try:
            with cancel_scope(shield=True):  # (runtime.scopes: anyio.CancelScope() looks the backend up each time)
                limiter = self._write_limiter
                if waited or self._gate.last_batch > 1:
                    await limiter.acquire()  # a pass of the loop (a checkpoint), then the writer
                else:
                    try:
                        limiter.acquire_nowait()
                    except anyio.WouldBlock:  # close() holds the writer
                        await limiter.acquire()
                try:
                    items, self._pending = self._pending, []
                    if not items:
                        return
                    writer = self._writer
                    if writer is None:
                        for item in items:
                            item.error, item.done = StoreError("the database is closed"), True
                        return
                    cost = await writer.run(lambda conn: self._commit_batch(conn, items), finish=True)
                    self._gate.wrote(len(items), cost)
                finally:
                    limiter.release()
        finally:
            # A batch that never reached the writer (its leader torn down while queueing for it) wrote
            # nothing: its writes go back to the front of the queue, for the next leader to take.
            self._pending[:0] = [item for item in items if not item.done]
            self._batch = None
            batch.finish()

    def _commit_batch(self, conn: sqlite3.Connection, items: list[Write[Any]]) -> float:
        """On the writer's thread: commit ``items``, then checkpoint if one is due; the commit's seconds."""
        if not self._patient:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            self._patient = True
        started = self._gate.clock()
        if self._guard.refusal() is not None:  # refused since these writes were queued
            for item in items:
                item.error, item.done = self._guard.refusal(), True
        elif commit.begin(conn, self.path, items):
            commit.commit(conn, self.path, items)
            self._kept(items)
        cost = self._gate.clock() - started
        if self._gate.checkpoint_due(conn):
            self._gate.checkpoint(conn)
        return cost

    # -- reads ------------------------------------------------------------------------------
    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on a reader connection, in one transaction (a consistent snapshot)."""
        readers = self._readers
        if readers is None:
            raise StoreError("the database is closed")
        with self._translated():
            return await readers.run(partial(_in_snapshot, fn))

    async def lookup(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a small point read ``fn(conn)`` right here, on the event loop's thread, as one snapshot.

        For reads of a few rows by key (a session's fields and one page of its chunks, a token). Handing
        such a read to a reader thread costs more than the read: in a server woken by a request, the two
        thread wake-ups of a hop measured about 250 microseconds, the read 100 to 300; and under the GIL
        the Python half of a read (rows into models) would not run beside the loop anyway. The caller
        keeps large reads off the loop (a session page is checked small from its row first: ``snapshot``
        in ``runtime.store.core.sessions``). When the file is locked (another process recovering the
        WAL), the read goes to a reader thread rather than hold up the loop.
        """
        conn = self._here
        if conn is None:
            raise StoreError("the database is closed")
        await anyio.lowlevel.checkpoint_if_cancelled()
        with self._translated():
            try:
                return _in_snapshot(fn, conn)
            except sqlite3.Error as exc:
                if health.error_code(exc) not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                    raise
        return await self.read(fn)


def _in_snapshot(fn: Callable[[sqlite3.Connection], T], conn: sqlite3.Connection) -> T:
    """``fn(conn)`` in one read transaction, ended by COMMIT when it changed no row, else ROLLBACK.

    Why COMMIT: a read may make a table of the connection's own (``temp``; keyword recall's vocabulary
    table was one, until it counted each word's matches instead) for the next reads on it too. A
    ROLLBACK undid it every time, and undoing a schema
    change resets every schema the connection has parsed: its next statement parsed the whole schema
    again and each statement after was prepared again (some 600 microseconds of a 1.2 ms keyword recall
    at 10k items). Changing no row, the transaction wrote nothing to the file, so COMMIT writes nothing
    either; a read that did change rows (a mistake) is still rolled back.
    """
    if conn.in_transaction:  # a read whose end never ran (an interrupt between the two): end it first
        conn.execute("ROLLBACK")
    conn.execute("BEGIN")
    changes = conn.total_changes
    try:
        result = fn(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT" if conn.total_changes == changes else "ROLLBACK")
    return result
