"""Fixtures of the PostgreSQL tests: a database per test session, a schema per test (see tests/pg.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from runtime.store import parse_store_url
from runtime.store.postgres import PostgresDatabase
from runtime.store.postgres import backend as postgres
from tests import pg
from tests.store.postgres.proxy import Proxy


@pytest.fixture
async def pg_url(pg_database: str) -> str:
    """A URL whose connections see only a fresh schema of their own (``search_path``)."""
    schema = await pg.create_schema(pg_database)
    return pg.url(pg_database, search_path=schema)


@pytest.fixture
async def store(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A migrated store for worker and server processes the test starts (the tests of several processes
    and of several hosts): every process started from here on polls once an hour, so only a
    notification wakes it, and none reads a store from the environment."""
    await postgres.migrate(parse_store_url(pg_url))
    monkeypatch.setenv("RATH_POLL_S", "3600")
    monkeypatch.delenv("RATH_STORE", raising=False)
    return pg_url


@pytest.fixture
async def db(pg_url: str) -> AsyncIterator[PostgresDatabase]:
    database = PostgresDatabase(pg_url, max_size=4)
    await database.open()
    try:
        yield database
    finally:
        await database.close()


@pytest.fixture
async def proxy() -> AsyncIterator[Proxy]:
    """A TCP proxy in front of the machine's PostgreSQL that a test can cut, refuse or hold."""
    p = Proxy()
    await p.start()
    try:
        yield p
    finally:
        await p.close()
