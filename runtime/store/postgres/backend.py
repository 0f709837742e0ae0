"""The PostgreSQL backend as ``runtime.store`` opens it: one pooled database, and the layers' stores on it.

Unlike the embedded SQLite default, opening never changes the schema: ``serve`` and ``worker`` may
run as an identity without DDL rights, so ``open`` only checks that no migration is pending
(``MigrationsPending``, one line naming ``rath-mcp migrate --store URL``); ``migrate`` (that
command) applies them under the advisory lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from runtime.schedules.store import Tick
from runtime.store.core import schedules
from runtime.store.core.backend import CoreBackend
from runtime.store.core.schedules import CoreScheduleStore
from runtime.store.postgres import migrations, recall
from runtime.store.postgres.database import PostgresDatabase
from runtime.store.postgres.executor import PostgresExecutor
from runtime.store.postgres.runs import PostgresRunQueue, PostgresRunStore, announced
from runtime.store.postgres.schema import ALL
from runtime.store.url import StoreURL

if TYPE_CHECKING:
    from runtime.backend import StoreBackend


class PostgresScheduleStore(CoreScheduleStore):
    """Schedules as the core keeps them, but the runs a tick makes are announced on commit as
    ``run_start``'s are, so workers in other processes claim them now rather than at their next poll."""

    def __init__(self, db: PostgresDatabase) -> None:
        super().__init__(PostgresExecutor(db))
        self.db = db

    async def fire(self, schedule_id: str, expected: float, ticks: Sequence[Tick], next_at: float) -> list[str]:
        return await announced(self.db, _made, schedules.fire, schedule_id, expected, list(ticks), next_at)


def _made(run_ids: list[str]) -> list[str]:
    return run_ids


class PostgresBackend(CoreBackend[PostgresDatabase]):
    """An open PostgreSQL database and the stores of any tenant/project on it."""

    def __init__(self, url: StoreURL, db: PostgresDatabase) -> None:
        super().__init__(url, db, PostgresExecutor(db), recall, PostgresRunStore, PostgresRunQueue)

    def schedules(self) -> PostgresScheduleStore:
        return PostgresScheduleStore(self.db)


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


if TYPE_CHECKING:  # mypy holds the backend to the protocol the runtime types it by

    def _conforms(backend: PostgresBackend) -> StoreBackend:
        return backend
