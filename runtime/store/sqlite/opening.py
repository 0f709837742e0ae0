"""Opening the store's file: connections, WAL mode, migrations, and the read-only open of a file
this process may not write.

``open_for_writing`` gives the writer's connection and the readers' of a runtime that serves;
``open_for_reading`` only readers, of a store that is neither created nor migrated (inspecting a
home on a read-only mount). Both refuse a damaged or foreign file before anything reads it (``health``).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from runtime.errors import StoreError
from runtime.store.migration import Migration
from runtime.store.sqlite import guard, health
from runtime.store.sqlite.migrate import apply_migrations as apply_migrations  # re-exported: database.py names it
from runtime.store.sqlite.migrate import unapplied

BUSY_TIMEOUT_MS = 60_000
READERS = 3  # reader threads' connections; one more serves lookups on the event loop's thread


def _into_wal(conn: sqlite3.Connection) -> str:
    """Put the file in WAL mode; the journal mode it is in then.

    Two processes opening a new store at once each ask for WAL, and one may find the other mid-switch:
    SQLite then answers "database is locked" at once, without its busy handler (waiting there could
    deadlock). By the time it asks again the other has switched, and the answer is simply "wal".
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if health.error_code(exc) != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.005)  # on the opening thread, not the event loop


def _connect(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn


def make_directory(path: Path) -> None:
    """Create the directory the store at ``path`` goes in, if it is not there."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise StoreError(f"{path.parent} is a file, not a directory: give a directory for the store") from None
    except OSError as exc:
        raise StoreError(f"cannot create the directory {path.parent} for the store: {exc.strerror}") from exc


def open_for_writing(
    path: Path, synchronous: str, migrations: Sequence[Migration]
) -> tuple[sqlite3.Connection, list[sqlite3.Connection]]:
    """The writer's connection and ``READERS + 1`` readers' on the store at ``path``, created and
    migrated as needed (blocking: run it on a worker thread)."""
    with guard.creating(path):  # an empty file is an error, not a new store
        opened = [_connect(path, synchronous)]
        try:
            health.verify_opened(opened[0], path)  # a damaged or foreign file is refused before any write
            mode = _into_wal(opened[0])
            if mode.lower() != "wal":
                raise StoreError(f"could not put {path} in WAL mode (got {mode!r})")
            apply_migrations(opened[0], migrations)
            health.require_whole(opened[0], path, migrations)
            for _ in range(READERS + 1):
                opened.append(_connect(path, synchronous))
        except BaseException:
            for conn in opened:
                conn.close()
            raise
    return opened[0], opened[1:]


def open_for_reading(path: Path, migrations: Sequence[Migration]) -> list[sqlite3.Connection]:
    """``READERS + 1`` read-only connections to the existing store at ``path``, which must be whole and
    need no migration (it cannot be migrated here)."""
    opened: list[sqlite3.Connection] = []
    try:
        for _ in range(READERS + 1):
            opened.append(health.open_existing(path))
            opened[-1].row_factory = sqlite3.Row
        conn = opened[0]
        health.verify_opened(conn, path)
        pending = [m.name for m in unapplied(conn, migrations)]
        if pending:
            raise StoreError(
                f"the store at {path} needs {len(pending)} migration(s) of this version ({', '.join(pending)}), "
                "but it is read-only here: make the file and its directory writable by this user, "
                "then run `rath-mcp migrate`"
            )
        health.require_whole(conn, path, migrations)
    except BaseException:
        for conn in opened:
            conn.close()
        raise
    return opened


def pending_migrations(path: Path, migrations: Sequence[Migration]) -> list[str]:
    """Names of migrations a database file has not applied yet (all of them if it does not exist)."""
    if not path.exists():
        return [m.name for m in migrations]
    conn = health.open_existing(path)  # never creates (nor writes) the file; an empty one is an error
    try:
        return [m.name for m in unapplied(conn, migrations)]
    finally:
        conn.close()
