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
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

import anyio
import anyio.lowlevel
import anyio.to_thread

from runtime.errors import StoreError
from runtime.ids import now
from runtime.store.migration import Migration
from runtime.store.sqlite import commit, health
from runtime.store.sqlite.commit import Batch, InlineGate, Write
from runtime.store.sqlite.threads import ConnectionThreads

T = TypeVar("T")

WriteFn = Callable[[sqlite3.Connection], T]

_BUSY_TIMEOUT_MS = 60_000
_READERS = 3
_LOOKUP_BUSY_TIMEOUT_MS = 20


def _into_wal(conn: sqlite3.Connection) -> str:
    """Put the file in WAL mode; the journal mode it is in then.

    Two processes opening a new store at once each ask for WAL, and one may find the other mid-switch:
    SQLite then answers "database is locked" at once, without its busy handler (waiting there could
    deadlock). By the time it asks again the other has switched, and the answer is simply "wal".
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if health.error_code(exc) != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.005)  # on the opening thread, not the event loop


def _connect(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=_BUSY_TIMEOUT_MS / 1000)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn


class SQLiteDatabase:
    """A SQLite file opened for the runtime: group-committed writes, pooled reads, migrations."""

    def __init__(self, path: Path, *, synchronous: str = "FULL") -> None:
        self.path = path
        self.synchronous = synchronous
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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise StoreError(f"{self.path.parent} is a file, not a directory: give a directory for the store") from None
        except OSError as exc:
            raise StoreError(f"cannot create the directory {self.path.parent} for the store: {exc.strerror}") from exc
        with health.translated(self.path):
            writer, readers = await anyio.to_thread.run_sync(self._open_sync, list(migrations))
        self._here = readers.pop()
        self._here.execute(f"PRAGMA busy_timeout={_LOOKUP_BUSY_TIMEOUT_MS}")
        writer.execute("PRAGMA wal_autocheckpoint=0")  # the writer's thread checkpoints (commit.py)
        self._writer_conn = writer
        self._writer = ConnectionThreads("rath-sqlite-writer", [writer])
        self._readers = ConnectionThreads("rath-sqlite-reader", readers)

    def _open_sync(self, migrations: list[Migration]) -> tuple[sqlite3.Connection, list[sqlite3.Connection]]:
        opened = [_connect(self.path, self.synchronous)]
        try:
            health.verify_opened(opened[0], self.path)  # a damaged or foreign file is refused before any write
            mode = _into_wal(opened[0])
            if mode.lower() != "wal":
                raise StoreError(f"could not put {self.path} in WAL mode (got {mode!r})")
            apply_migrations(opened[0], migrations)
            missing = health.missing_schema(opened[0], migrations)
            if missing:
                raise StoreError(f"the store at {self.path} lacks {', '.join(missing)}: {health.DAMAGE_HINT}")
            for _ in range(_READERS + 1):  # the last one serves lookup()
                opened.append(_connect(self.path, self.synchronous))
        except BaseException:
            for conn in opened:
                conn.close()
            raise
        return opened[0], opened[1:]

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
                    writer.stop()
                    await writer.join()
            readers, self._readers = self._readers, None
            if readers is not None:
                readers.stop()
                await readers.join()
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
        item: Write[T] = Write(fn)
        if small and self._commit_here(item):
            if self._gate.pass_due():  # let the tasks this held up run (commit.py); a cancel here is as after a hop
                await asyncio.sleep(0)
            return self._outcome(item)
        self._pending.append(item)
        waited = False
        while not item.done:
            batch = self._batch
            if batch is not None:
                try:
                    await batch.wait()
                except BaseException:
                    if item in self._pending:  # not taken yet: withdraw it, nothing was written
                        self._pending.remove(item)
                    raise
                waited = True
                continue
            try:
                await self._lead_batch(waited)
            except BaseException:
                if item in self._pending:  # handed back unrun (the leader was torn down): withdraw it
                    self._pending.remove(item)
                raise
        return self._outcome(item)

    def _outcome(self, item: Write[T]) -> T:
        if item.error is not None:
            raise health.store_error(self.path, item.error) or item.error
        return item.result  # type: ignore[no-any-return]

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
            with anyio.CancelScope(shield=True):
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
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            self._patient = True
        started = self._gate.clock()
        if commit.begin(conn, self.path, items):
            commit.commit(conn, self.path, items)
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
        with health.translated(self.path):
            return await readers.run(partial(_in_snapshot, fn))

    async def lookup(self, fn: Callable[[sqlite3.Connection], T], *, small: Callable[[sqlite3.Connection], bool]) -> T:
        """Run a small point read ``fn(conn)`` right here, on the event loop's thread, as one snapshot.

        For reads of a few rows by key (a session's fields and one page of its chunks). Handing such
        a read to a reader thread costs more than the read: in a server woken by a request, the two
        thread wake-ups of a hop measured about 250 microseconds, the read 100 to 300; and under
        the GIL the Python half of a read (rows into models) would not run beside the loop anyway.
        ``small(conn)`` is asked first, in the same snapshot, whether the rows are small enough, from
        something cheap that reads none of them (for a session page: the session row's character
        count and a bounded walk of its segments). When they are not, or the file is locked (another
        process recovering the WAL), the read goes to a reader thread rather than hold up the loop.
        """
        conn = self._here
        if conn is None:
            raise StoreError("the database is closed")
        await anyio.lowlevel.checkpoint_if_cancelled()
        try:
            done, value = _in_snapshot(lambda c: (True, fn(c)) if small(c) else (False, None), conn)
            if done:
                return cast(T, value)
        except sqlite3.Error as exc:
            if health.error_code(exc) not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                error = health.store_error(self.path, exc)
                if error is None:
                    raise
                raise error from exc
        return await self.read(fn)


def _in_snapshot(fn: Callable[[sqlite3.Connection], T], conn: sqlite3.Connection) -> T:
    if conn.in_transaction:  # a read whose ROLLBACK never ran (an interrupt between the two): end it first
        conn.execute("ROLLBACK")
    conn.execute("BEGIN")
    try:
        return fn(conn)
    finally:
        conn.execute("ROLLBACK")


def prefix_bounds(prefix: str) -> tuple[str, str]:
    """``lo, hi`` such that ``lo <= x < hi`` holds exactly for the strings ``x`` starting with ``prefix``
    (under SQLite's default binary collation), so a prefix search is a range scan on an index."""
    return prefix, prefix + "\U0010ffff"


def id_search_sql(table: str, also: str = "") -> str:
    """A search for the ids in ``table`` that start with a prefix, newest first, within one tenant/project
    (``also``: a further condition). It is a range scan on an index of (tenant, project, id)."""
    return (
        f"SELECT id FROM {table} WHERE tenant = ? AND project = ?{also} AND id >= ? AND id < ? ORDER BY id DESC LIMIT ?"
    )


async def search_ids(
    db: SQLiteDatabase, table: str, tenant: str, project: str, prefix: str, limit: int, *, also: str = ""
) -> list[str]:
    """Run ``id_search_sql`` on a reader thread: the ids, newest first."""
    sql, args = id_search_sql(table, also), (tenant, project, *prefix_bounds(prefix), limit)
    return await db.read(lambda conn: [row[0] for row in conn.execute(sql, args)])


def apply_migrations(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[str]:
    """Apply the migrations not yet recorded, in order, under the database write lock."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        applied = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
        done: list[str] = []
        for migration in migrations:
            if migration.name in applied:
                continue
            for statement in _statements(migration.sql):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)", (migration.name, now()))
            done.append(migration.name)
        conn.execute("COMMIT")
        return done
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def pending_migrations(path: Path, migrations: Sequence[Migration]) -> list[str]:
    """Names of migrations a database file has not applied yet (all of them if it does not exist)."""
    if not path.exists():
        return [m.name for m in migrations]
    conn = sqlite3.connect(path)
    try:
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'"
        ).fetchone()
        applied = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")} if has_table else set()
    finally:
        conn.close()
    return [m.name for m in migrations if m.name not in applied]


def _statements(sql: str) -> list[str]:
    """Split a migration script into statements (``sqlite3.complete_statement`` knows triggers)."""
    out: list[str] = []
    current = ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                out.append(current.strip())
            current = ""
    if current.strip():
        out.append(current.strip())
    return out
