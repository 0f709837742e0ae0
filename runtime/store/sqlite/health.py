"""The health of an embedded SQLite store: what a SQLite error says about the file, checks, backups.

A store file can be damaged (a crash on a disk that lied about fsync, a copy taken mid-write, a
restore that kept an old ``-wal`` beside a new file), foreign (some other program's database, or
no database at all), unusable (read-only, full disk) or edited by hand (a dropped table). SQLite
reports each as a bare ``sqlite3.Error`` from whatever statement met it first; ``store_error``
turns the ones that are about the file, not about our SQL, into a ``StoreError`` that says what is
wrong, where, and what to do. ``verify_opened`` is run on every open: it finds a damaged page
before the store is served (SQLite itself would serve the intact pages silently, and fail only
the queries that reach the bad one), and refuses a database that is not a rath store.

``check`` (behind ``rath-mcp check``) runs SQLite's full ``integrity_check`` and compares the
schema with what the migrations create. ``backup`` copies a live store with SQLite's online backup
API: the copy is one consistent snapshot even while servers write, because in WAL mode the
backup's read transaction sees one commit and does not block writers.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.errors import StoreDamagedError, StoreError
from runtime.store.sqlite import guard
from runtime.store.sqlite.migrate import applied_names, apply_migrations, table_names, unapplied

if TYPE_CHECKING:
    from runtime.store.migration import Migration

RESTORE_HINT = (
    "stop every server and worker on it, then restore a backup (README: 'Back up and restore') "
    "or move the file aside to start afresh"
)
DAMAGE_HINT = RESTORE_HINT + "; `rath-mcp check` shows what is wrong"
_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_MAX_PROBLEMS = 5


def error_code(exc: BaseException) -> int:
    """SQLite's primary result code of an error (``SQLITE_BUSY``, ``SQLITE_CORRUPT``...; 0 when it has none)."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF


def store_error(path: Path, exc: BaseException) -> StoreError | None:
    """The ``StoreError`` a SQLite error on the store at ``path`` means; None when it is not about the
    file (a constraint the caller handles, or a bug in our SQL, which should stay a crash)."""
    if isinstance(exc, StoreError):
        return exc
    if not isinstance(exc, sqlite3.Error):
        return None
    code = error_code(exc)
    text = str(exc)
    if code == sqlite3.SQLITE_NOTADB:
        return StoreDamagedError(f"the store at {path} is damaged or not a database ({text}): {DAMAGE_HINT}")
    if code in _DAMAGED:
        return StoreDamagedError(f"the store at {path} is damaged ({text}): {DAMAGE_HINT}")
    if code == sqlite3.SQLITE_READONLY or (code == sqlite3.SQLITE_CANTOPEN and _read_only_directory(path)):
        return StoreError(guard.read_only_message(path, text))
    if code == sqlite3.SQLITE_CANTOPEN:
        return StoreError(f"cannot open the store at {path} ({text}): check that its directory exists and is writable")
    if code == sqlite3.SQLITE_FULL:
        return StoreError(f"the disk holding the store at {path} is full ({text}): free some space and retry")
    if code == sqlite3.SQLITE_IOERR:
        return StoreError(f"the store at {path} could not be read or written ({text}): check the disk")
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreError(f"the store at {path} stayed locked by another process ({text}); retry when it is done")
    if text.startswith("no such table: ") and _is_ours(text.removeprefix("no such table: ")):
        return StoreDamagedError(f"the store at {path} lacks a table this version needs ({text}): {DAMAGE_HINT}")
    return None


def _is_ours(table: str) -> bool:
    """Whether the migrations create ``table`` (so its absence is a damaged store, not a typo in a query)."""
    from runtime.store.sqlite.migrations import (
        ALL_MIGRATIONS,  # imported here: the schema modules import database.py, which imports this one
    )

    return ("table", table.removeprefix("main.")) in _reference_schema(tuple(ALL_MIGRATIONS))


def _read_only_directory(path: Path) -> bool:
    """Whether the store's directory exists but cannot be written (a read-only mount or mode): SQLite needs
    to write its -wal and -shm files beside the store even to read it."""
    return path.parent.is_dir() and not os.access(path.parent, os.W_OK)


@contextlib.contextmanager
def translated(path: Path) -> Iterator[None]:
    """Raise SQLite errors that are about the store file as ``StoreError`` (see ``store_error``)."""
    try:
        yield
    except sqlite3.Error as exc:
        error = store_error(path, exc)
        if error is None:
            raise
        raise error from exc


def verify_opened(conn: sqlite3.Connection, path: Path) -> None:
    """On open, before anything is written: refuse a damaged file and a database that is not ours.

    ``quick_check`` reads every page (O(size), about a second per GB here) but skips the index
    cross-checks of the full ``integrity_check`` that ``rath-mcp check`` runs.
    """
    with translated(path):
        problems = _problems(conn, "quick_check")
        if problems:
            raise StoreDamagedError(f"the store at {path} is damaged ({problems[0]}): {DAMAGE_HINT}")
        tables = table_names(conn)
    if tables and "schema_migrations" not in tables:
        some = ", ".join(sorted(tables)[:5])
        raise StoreError(
            f"{path} is a SQLite database of another program (tables: {some}), not a rath store; "
            "use another home, or move the file aside"
        )


def _problems(conn: sqlite3.Connection, pragma: str) -> list[str]:
    """What ``PRAGMA quick_check``/``integrity_check`` found (empty when the file is sound)."""
    rows = [str(row[0]) for row in conn.execute(f"PRAGMA {pragma}({_MAX_PROBLEMS})")]
    return [] if rows == ["ok"] else rows


def require_whole(conn: sqlite3.Connection, path: Path, migrations: Sequence[Migration]) -> None:
    """Refuse a store that lacks some of what its applied migrations create (``missing_schema``) as damaged."""
    missing = missing_schema(conn, migrations)
    if missing:
        raise StoreDamagedError(f"the store at {path} lacks {', '.join(missing)}: {DAMAGE_HINT}")


def missing_schema(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[str]:
    """Tables, indexes and triggers the applied migrations create that the store lacks (a hand edit)."""
    applied = applied_names(conn)
    wanted = _reference_schema(tuple(m for m in migrations if m.name in applied))
    present = {(str(row[0]), str(row[1])) for row in conn.execute("SELECT type, name FROM sqlite_master")}
    # tables first: a dropped table takes its indexes with it, and the table is what to name
    return [f"{kind} {name}" for kind, name in sorted(wanted - present, key=lambda kn: (kn[0] != "table", kn))]


@functools.lru_cache(maxsize=8)
def _reference_schema(migrations: tuple[Migration, ...]) -> frozenset[tuple[str, str]]:
    """(type, name) of what these migrations create, from running them on an empty in-memory database."""
    reference = sqlite3.connect(":memory:", isolation_level=None)
    try:
        apply_migrations(reference, migrations)
        rows = reference.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite%'")
        return frozenset((str(kind), str(name)) for kind, name in rows)
    finally:
        reference.close()


@dataclass
class Report:
    """What ``check`` found: ``healthy`` when the file is sound, its schema whole and no migration pending."""

    path: Path
    problems: list[str] = field(default_factory=list)
    foreign: str | None = None  # what the file holds instead, when it is some other program's database
    missing: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    read_only: bool = False  # this process cannot write it (not a fault of the file; servers need to)

    @property
    def healthy(self) -> bool:
        return not (self.problems or self.foreign or self.missing or self.pending)


def read_only_uri(path: Path) -> str:
    """The URI of a read-only connection to the store at ``path``, which exists.

    SQLite reads a WAL-mode file through the ``-shm`` beside it, creating one when there is none;
    in a directory it may not write (a read-only mount), it then cannot open the file at all. With
    no ``-wal`` there (or an empty one) every commit is in the file itself: it is then opened
    ``immutable``, read as it is, without ``-shm`` or locks. (A writer where the directory is
    writable would make a ``-wal`` first; this is for inspecting a store no server writes.)
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    wal = guard.wal_of(path)
    if not os.access(path.parent, os.W_OK) and (not wal.exists() or wal.stat().st_size == 0):
        uri += "&immutable=1"
    return uri


def open_existing(path: Path) -> sqlite3.Connection:
    """A connection to a store file that must exist already (never creates one); read-only, for any thread."""
    guard.require_store(path)
    with translated(path):
        conn = sqlite3.connect(read_only_uri(path), uri=True, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 60000")
    return conn


def check(path: Path, migrations: Sequence[Migration]) -> Report:
    """Run SQLite's full ``integrity_check`` on the store at ``path`` and compare its schema and migrations."""
    report = Report(path, read_only=not guard.writable(path))
    try:
        guard.refuse_empty(path)
    except StoreDamagedError:
        report.problems = ["the file is empty (0 bytes): it holds no store"]
        return report
    conn = open_existing(path)
    try:
        with translated(path):
            try:
                report.problems = _problems(conn, "integrity_check")
            except sqlite3.DatabaseError as exc:
                if error_code(exc) not in _DAMAGED:  # the file could not be read (read-only, locked...): not damage
                    raise
                report.problems = [str(exc)]  # damaged beyond what integrity_check can walk
                return report
            tables = table_names(conn)
            if tables and "schema_migrations" not in tables:
                report.foreign = f"tables {', '.join(sorted(tables)[:5])} and no schema_migrations"
                return report
            if tables:
                report.missing = missing_schema(conn, migrations)
            report.pending = [m.name for m in unapplied(conn, migrations)]
    finally:
        conn.close()
    return report


def backup(path: Path, dest: Path) -> Path:
    """Copy the live store at ``path`` to ``dest`` (a new file; a directory gets ``rath.db`` inside).

    The copy is written beside its destination under a temporary name, checked, and renamed into
    place, so ``dest`` is never a half-written file. Returns the path written.
    """
    target = dest / path.name if dest.is_dir() else dest
    if target.exists():
        raise StoreError(f"{target} exists already; give a new file name (a backup never overwrites a file)")
    if not target.parent.is_dir():
        raise StoreError(f"the directory {target.parent} does not exist; create it first")
    if target.resolve() == path.resolve():
        raise StoreError("the backup must go to another file than the store itself")
    tmp = target.with_name(f".{target.name}.{os.getpid()}.partial")
    source = open_existing(path)
    try:
        with translated(path):
            verify_opened(source, path)
            copy = sqlite3.connect(tmp, isolation_level=None)
            try:
                source.backup(copy)  # all pages in one step: one read transaction, one snapshot
                copy.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
                problems = _problems(copy, "quick_check")
            finally:
                copy.close()
        if problems:
            raise StoreError(f"the copy at {tmp} did not check out ({problems[0]}); the store may be damaged")
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        source.close()
    return target
