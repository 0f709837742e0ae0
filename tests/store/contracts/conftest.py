"""The ``backend`` fixture every contract suite runs on: each store backend this build has, opened fresh.

A backend joins by adding its name to ``BACKENDS`` and a branch to ``open_test_backend``. The
PostgreSQL one migrates a fresh schema of its own in this test session's own database (tests/pg.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime.backend import StoreBackend
from runtime.store import StoreURL, open_backend, parse_store_url
from runtime.store.migration import Migration
from runtime.store.postgres import PostgresDatabase, migrations
from tests import pg

BACKENDS = ["sqlite", "postgresql"]


def fresh_store_url(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreURL:
    """A fresh, empty store of backend ``name`` (called outside the event loop: it may make a database)."""
    if name == "sqlite":
        return parse_store_url(f"sqlite://{tmp_path / 'contract.db'}")
    if name == "postgresql":
        database = request.getfixturevalue("pg_database")
        return parse_store_url(pg.url(database, search_path=asyncio.run(pg.create_schema(database))))
    raise AssertionError(f"no way to open a {name} backend for the contract tests")  # pragma: no cover


def migrated_store_url(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreURL:
    """``fresh_store_url``, migrated where the store does not migrate on open (PostgreSQL), for tests that
    open a ``Runtime`` or server on it (called outside the event loop)."""
    url = fresh_store_url(name, tmp_path, request)
    if url.scheme == "postgresql":
        from runtime.store.postgres import backend as postgres

        asyncio.run(postgres.migrate(url))
    return url


def postgres_dsn(request: pytest.FixtureRequest) -> str:
    """A URL on a fresh schema of the session's PostgreSQL database (call it from a sync fixture)."""
    return fresh_store_url("postgresql", Path("."), request).url


@asynccontextmanager
async def open_postgres(dsn: str, layer: Sequence[Migration]) -> AsyncIterator[PostgresDatabase]:
    """The database at ``dsn`` with one layer's migrations applied (a layer's store tested on its own)."""
    await migrations.apply(dsn, layer)
    async with PostgresDatabase(dsn, max_size=4) as db:
        yield db


@asynccontextmanager
async def open_test_backend(store: str | StoreURL, tmp_path: Path | None = None) -> AsyncIterator[StoreBackend]:
    """Open a store: a URL from ``fresh_store_url`` (any backend), or ``"sqlite"`` in ``tmp_path``."""
    if isinstance(store, str):
        if store != "sqlite" or tmp_path is None:  # pragma: no cover - a test written wrongly
            raise AssertionError(f"open a {store} store from its URL (the store_url fixture, fresh_store_url)")
        store = parse_store_url(f"sqlite://{tmp_path / 'contract.db'}")
    if store.scheme == "postgresql":
        from runtime.store.postgres import backend as postgres

        await postgres.migrate(store)  # PostgreSQL never migrates on open
    backend: StoreBackend = await open_backend(store)
    try:
        yield backend
    finally:
        await backend.close()


async def open_again(backend: StoreBackend) -> Any:
    """A second backend on the same store: another process, as far as the store can tell."""
    return await open_backend(backend.url)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> StoreURL:
    return fresh_store_url(request.param, tmp_path, request)


@pytest.fixture
async def backend(store_url: StoreURL) -> AsyncIterator[StoreBackend]:
    async with open_test_backend(store_url) as opened:
        yield opened
