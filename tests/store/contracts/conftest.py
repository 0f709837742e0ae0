"""The ``backend`` fixture every contract suite runs on: each store backend this build has, opened fresh.

A backend joins by adding its name to ``BACKENDS`` and a branch to ``open_test_backend`` (the
PostgreSQL one makes a database of its own per test session and drops it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from runtime.backend import StoreBackend
from runtime.store import open_backend, parse_store_url
from runtime.store.postgres import Migration, PostgresDatabase, migrations
from tests import pg

BACKENDS = ["sqlite"]


@asynccontextmanager
async def open_test_backend(name: str, tmp_path: Path) -> AsyncIterator[StoreBackend]:
    if name == "sqlite":
        url = parse_store_url(f"sqlite://{tmp_path / 'contract.db'}")
    else:  # pragma: no cover - a backend listed without a way to open it
        raise AssertionError(f"no way to open a {name} backend for the contract tests")
    backend: StoreBackend = await open_backend(url)
    try:
        yield backend
    finally:
        await backend.close()


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreBackend]:
    async with open_test_backend(request.param, tmp_path) as opened:
        yield opened


# -- PostgreSQL, one layer's store at a time (until the PostgreSQL backend opens all three) ---------------
@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """This test session's own PostgreSQL database, dropped at the end (fails under CI if unreachable)."""
    pg.require_postgres()
    name = pg.create_database()
    try:
        yield name
    finally:
        pg.drop_database(name)


def postgres_dsn(request: pytest.FixtureRequest) -> str:
    """A URL on a fresh schema of the session's PostgreSQL database; call it from a sync fixture (it makes
    the database on first use, so SQLite-only runs need no server)."""
    database = request.getfixturevalue("pg_database")
    return pg.url(database, search_path=asyncio.run(pg.create_schema(database)))


@asynccontextmanager
async def open_postgres(dsn: str, layer: Sequence[Migration]) -> AsyncIterator[PostgresDatabase]:
    """The database at ``dsn`` with ``layer``'s migrations applied."""
    await migrations.apply(dsn, layer)
    async with PostgresDatabase(dsn, max_size=4) as db:
        yield db
