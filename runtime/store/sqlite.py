"""The embedded SQLite database every SQLite repository shares.

One writer connection and a few reader connections on one file, WAL mode. Writes are *group
committed*: concurrent ``write(fn)`` calls are gathered into one ``BEGIN IMMEDIATE`` transaction,
run in one thread hop, each under its own SAVEPOINT (so one failing write rolls back alone), and
committed with one fsync. Per-statement awaits are what make asyncio SQLite slow (see
ARCHITECTURE.md); a whole transaction per hop, and many per fsync, is what makes it fast.

Several processes may open the same file: SQLite's own lock serialises their writers and
``busy_timeout`` makes them wait instead of failing.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio
import anyio.to_thread

from runtime.errors import StoreError
from runtime.ids import now

T = TypeVar("T")

WriteFn = Callable[[sqlite3.Connection], T]

_BUSY_TIMEOUT_MS = 60_000
_READERS = 3


@dataclass(frozen=True)
class Migration:
    """One named schema change; applied once, in order, and recorded in ``schema_migrations``."""

    name: str
    sql: str


@dataclass
class _Write(Generic[T]):
    fn: WriteFn[T]
    result: Any = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class _Batch:
    finished: anyio.Event = field(default_factory=anyio.Event)


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
        self._writer: sqlite3.Connection | None = None
        self._readers: list[sqlite3.Connection] = []
        self._closed = False  # set by close(): a reader connection in use then is closed, not pooled
        self._reader_lock = threading.Lock()
        self._read_limiter = anyio.CapacityLimiter(_READERS)
        self._write_limiter = anyio.CapacityLimiter(1)
        self._pending: list[_Write[Any]] = []
        self._batch: _Batch | None = None

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self, migrations: Sequence[Migration]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        await anyio.to_thread.run_sync(self._open_sync, list(migrations))

    def _open_sync(self, migrations: list[Migration]) -> None:
        writer = _connect(self.path, self.synchronous)
        try:
            mode = writer.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"could not put {self.path} in WAL mode (got {mode!r})")
            apply_migrations(writer, migrations)
        except BaseException:
            writer.close()
            raise
        self._writer, self._closed = writer, False

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            async with self._write_limiter:
                writer, self._writer = self._writer, None
                if writer is not None:
                    writer.close()
            with self._reader_lock:
                self._closed = True
                for conn in self._readers:
                    conn.close()
                self._readers.clear()

    # -- writes -----------------------------------------------------------------------------
    async def write(self, fn: WriteFn[T]) -> T:
        """Run ``fn(conn)`` inside a write transaction and return its result once committed.

        ``fn`` runs in a worker thread and must only use the connection it is given. If it
        raises, its changes are rolled back (and only its changes) and the error is re-raised.
        """
        item: _Write[T] = _Write(fn)
        self._pending.append(item)
        while not item.done:
            batch = self._batch
            if batch is not None:
                try:
                    await batch.finished.wait()
                except BaseException:
                    if item in self._pending:  # not taken yet: withdraw it, nothing was written
                        self._pending.remove(item)
                    raise
                continue
            await self._lead_batch()
        if item.error is not None:
            raise item.error
        return item.result  # type: ignore[no-any-return]

    async def _lead_batch(self) -> None:
        batch = self._batch = _Batch()
        items, self._pending = self._pending, []
        try:
            with anyio.CancelScope(shield=True):
                async with self._write_limiter:
                    await anyio.to_thread.run_sync(self._commit_batch, items)
        finally:
            self._batch = None
            batch.finished.set()

    def _commit_batch(self, items: list[_Write[Any]]) -> None:
        conn = self._writer
        if conn is None:
            for item in items:
                item.error, item.done = StoreError("the database is closed"), True
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            for item in items:
                item.error, item.done = StoreError(f"could not start a write transaction: {exc}"), True
            return
        try:
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
            for item in items:
                if item.error is None:
                    item.result, item.error = None, StoreError(f"the write transaction failed: {exc}")
            if not isinstance(exc, sqlite3.Error):
                raise
        finally:
            for item in items:
                item.done = True

    # -- reads ------------------------------------------------------------------------------
    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on a reader connection (a consistent snapshot) in a worker thread."""
        async with self._read_limiter:
            return await anyio.to_thread.run_sync(self._read_sync, fn)

    def _read_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._reader_lock:
            conn = self._readers.pop() if self._readers else _connect(self.path, self.synchronous)
        try:
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                conn.execute("ROLLBACK")
        finally:
            with self._reader_lock:
                pooled = not self._closed
                if pooled:
                    self._readers.append(conn)
            if not pooled:  # the database was closed while this read ran
                conn.close()


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
