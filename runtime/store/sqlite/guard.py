"""What keeps an embedded store from acknowledging a write it will lose.

SQLite goes on writing to the file it has open, whatever became of it. Deleted (or moved, or
replaced by a restore) under a running server, the file lives on unnamed: every commit still
succeeds, into a file that is gone the moment the server stops (in WAL mode SQLite does not ask
whether the file moved before a write, as it does with a rollback journal). Damaged, it still
takes the writes that miss the bad pages. ``FileGuard`` refuses such writes:

* once the store has reported damage (``StoreDamagedError``, from a read or a write), every write
  is refused with the same line (the first error it saw), until a restart;
* after each commit, the store's path is asked whether it still names the file that was opened
  (``st_dev``/``st_ino`` of the database and its ``-wal``, as SQLite's own moved-file check does).
  It is asked *after* the commit, so a write it acknowledges was in the file at the path when it
  answered. The two ``stat`` calls cost about 5 microseconds here (7 right after an fsync), against
  150 to 250 for a commit with its fsync, and a group commit pays them once for all its writes;
* a store opened read-only refuses writes from the start, saying so.

A write refused after its commit went into the old file and is lost with it (where a restore under
a running server kept the old ``-wal`` beside the new file, which the README's restore removes, it
may come back with that ``-wal``: refused, never acknowledged and then lost).

``creating`` makes a zero-length file at the path an error rather than a fresh store (an empty
file is what a failed copy or a full disk leaves), while still letting a new home create one,
even when two processes open the same new store at once (see there).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from runtime.errors import StoreDamagedError, StoreError

Identity = tuple[int, int]

RESTART_HINT = (
    "writes are refused from now on, as they would not be kept. Stop every server and worker on it, "
    "put the file back or restore a backup (README: 'Back up and restore'), and restart the server "
    "(with no file there, it starts a new store)"
)


def wal_of(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def writable(path: Path) -> bool:
    """Whether this process may write the store at ``path`` (and the -wal/-shm beside it).

    ``os.access`` asks the kernel, which answers no for a read-only mount or an immutable file even
    to root (who passes every mode check).
    """
    if not os.access(path.parent, os.W_OK):
        return False
    return not path.exists() or os.access(path, os.W_OK)


def read_only_message(path: Path, detail: str = "") -> str:
    why = f" ({detail})" if detail else ""
    return (
        f"the store at {path} is read-only{why}: make the file and its directory writable by this user, "
        "or use another home"
    )


def empty_file_error(path: Path) -> StoreError:
    return StoreDamagedError(
        f"the store at {path} is an empty file (0 bytes), not a rath store: restore a backup "
        "(README: 'Back up and restore'), or remove the empty file to start a new store there"
    )


@contextlib.contextmanager
def creating(path: Path) -> Iterator[None]:
    """Around opening the store at ``path`` and making it a database: refuse a zero-length file.

    SQLite treats an empty file as a new database and would make a fresh store of it. But SQLite
    also *creates* the file empty and writes its first page only at the switch to WAL: another
    process opening a new store at that moment sees an empty file too. So whoever finds no file or
    an empty one takes an exclusive lock on the directory (``flock``, released with its descriptor)
    and looks again under it; the opener holds it until the file has its first page. Under the lock,
    an empty file was left by someone else, not being made. An existing store costs one ``stat``.
    """
    if (_size(path) or 0) > 0:
        yield
        return
    fd = _lock_directory(path)
    try:
        if fd is not None and _size(path) == 0:
            raise empty_file_error(path)
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


def require_store(path: Path) -> None:
    """Raise unless there is a store file at ``path`` to open without creating one: none, or an empty one."""
    if not path.is_file():
        raise StoreError(f"there is no store at {path}")
    refuse_empty(path)


def refuse_empty(path: Path) -> None:
    """Raise ``empty_file_error`` when the store's file is empty and no process is making it a store
    (one that is, is waited for: see ``creating``)."""
    with creating(path):
        pass


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _lock_directory(path: Path) -> int | None:
    """A descriptor of the store's directory holding an exclusive ``flock`` on it; None where it cannot
    be had (no directory: opening says what is wrong; a filesystem without ``flock``: an empty file
    then cannot be told from one being made, and is left to SQLite as before)."""
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # on a worker thread: the event loop never waits here
    except OSError:
        os.close(fd)
        return None
    return fd


class FileGuard:
    """Why writes to one store are refused, if they are (``refusal``); see the module's text."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._refusal: StoreError | None = None
        self._names = (os.fspath(path), os.fspath(wal_of(path)))  # as strings: a commit stats them
        self._pinned: tuple[Identity | None, Identity | None] | None = None

    def pin(self) -> None:
        """Remember the files the store's connections have open (right after opening them)."""
        self._pinned = self._identities()

    def _identities(self) -> tuple[Identity | None, Identity | None]:
        found: list[Identity | None] = []
        for name in self._names:
            try:
                st = os.stat(name)
            except FileNotFoundError:
                found.append(None)
            else:
                found.append((st.st_dev, st.st_ino))
        return found[0], found[1]

    def refuse(self, error: StoreError) -> None:
        """Refuse every write from now on, with ``error``'s line (the first reason given stays)."""
        if self._refusal is None:
            self._refusal = error

    def noticed(self, error: BaseException) -> None:
        """An error the store raised: damage means no more writes."""
        if isinstance(error, StoreDamagedError):
            self.refuse(error)

    def refusal(self) -> StoreError | None:
        """The error to fail a write with (a fresh one each time: one exception raised in many tasks
        would gather all their tracebacks), or None while writes are accepted."""
        first = self._refusal
        if first is None:
            return None
        return StoreDamagedError(str(first)) if isinstance(first, StoreDamagedError) else StoreError(str(first))

    def lost(self) -> StoreError | None:
        """After a commit: None when the store's path still names the files committed to; else the
        error its writes fail with (they went into a file that is gone), refusing every later write."""
        pinned = self._pinned
        if pinned is None:
            return None
        now = self._identities()
        if now == pinned:
            return None
        if now[0] is None:
            what = f"the store at {self.path} was deleted or moved away while this process had it open"
        elif now[0] != pinned[0]:
            what = f"the store at {self.path} was replaced by another file while this process had it open"
        else:
            what = f"the store at {self.path} lost its write-ahead log {self._names[1]} (deleted or replaced)"
        self.refuse(StoreDamagedError(f"{what}: {RESTART_HINT}"))
        return self.refusal()
