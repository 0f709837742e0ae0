"""The SQLite backend as ``runtime.store`` opens it: one database file, and the three layers' stores on it.

The embedded default migrates itself on open (CONTRACT §3); ``pending``/``migrate`` serve
``rath-mcp migrate``.
"""

from __future__ import annotations

import anyio.to_thread

from runtime.errors import StoreError
from runtime.store.core.backend import CoreBackend
from runtime.store.sqlite import guard, health, recall
from runtime.store.sqlite.database import SQLiteDatabase, pending_migrations
from runtime.store.sqlite.executor import SQLiteExecutor
from runtime.store.sqlite.migrations import ALL_MIGRATIONS
from runtime.store.url import StoreURL


class SQLiteBackend(CoreBackend[SQLiteDatabase]):
    """An open SQLite database and the stores of any tenant/project on it."""

    def __init__(self, url: StoreURL, db: SQLiteDatabase) -> None:
        super().__init__(url, db, SQLiteExecutor(db), recall)


def sqlite_database(backend: object) -> SQLiteDatabase:
    """The database under an open SQLite backend (for tests and benchmarks that read its files and SQL)."""
    if not isinstance(backend, SQLiteBackend):
        raise StoreError(f"{getattr(backend, 'url', backend)} is not a SQLite store")
    return backend.db


def _path(url: StoreURL) -> SQLiteDatabase:
    if url.path is None:
        raise StoreError(f"{url} does not name a SQLite file")
    return SQLiteDatabase(url.path, read_only=url.read_only and not guard.writable(url.path))


async def open(url: StoreURL, *, synchronous: str = "FULL") -> SQLiteBackend:
    db = _path(url)
    db.synchronous = synchronous
    await db.open(ALL_MIGRATIONS)
    return SQLiteBackend(url, db)


async def pending(url: StoreURL) -> list[str]:
    path = _path(url).path
    with health.translated(path):  # a damaged or foreign file: one line saying what to do
        return await anyio.to_thread.run_sync(pending_migrations, path, ALL_MIGRATIONS)


async def migrate(url: StoreURL) -> list[str]:
    names = await pending(url)
    db = _path(url)
    await db.open(ALL_MIGRATIONS)
    await db.close()
    return names
