"""The PostgreSQL backend as ``runtime.store`` opens it: one pooled database, and the layers' stores on it.

Unlike the embedded SQLite default, opening never changes the schema: ``serve`` and ``worker`` may
run as an identity without DDL rights, so ``open`` only checks that no migration is pending
(``MigrationsPending``, one line naming ``rath-mcp migrate --store URL``); ``migrate`` (that
command) applies them under the advisory lock.
"""

from __future__ import annotations

from runtime.store.core.backend import CoreBackend
from runtime.store.postgres import migrations, recall
from runtime.store.postgres.database import PostgresDatabase
from runtime.store.postgres.executor import PostgresExecutor
from runtime.store.postgres.runs import PostgresRunStore
from runtime.store.postgres.schema import ALL
from runtime.store.url import StoreURL


class PostgresBackend(CoreBackend[PostgresDatabase]):
    """An open PostgreSQL database and the stores of any tenant/project on it."""

    run_store = PostgresRunStore

    def __init__(self, url: StoreURL, db: PostgresDatabase) -> None:
        super().__init__(url, db, PostgresExecutor(db), recall)


async def open(url: StoreURL, *, synchronous: str = "FULL", max_size: int = 8) -> PostgresBackend:
    """Open the pool once the schema is known to be current (``synchronous`` is SQLite's; PostgreSQL
    always commits durably here)."""
    del synchronous
    await migrations.require_current(url.url, ALL)
    db = PostgresDatabase(url.url, max_size=max_size)
    await db.open()
    return PostgresBackend(url, db)


async def pending(url: StoreURL) -> list[str]:
    return await migrations.pending(url.url, ALL)


async def migrate(url: StoreURL) -> list[str]:
    return await migrations.apply(url.url, ALL)
