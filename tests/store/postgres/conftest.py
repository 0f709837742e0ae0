"""Fixtures of the PostgreSQL tests: a database per test session, a schema per test (see tests/pg.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from runtime.store.postgres import PostgresDatabase
from tests import pg
from tests.store.postgres.proxy import Proxy


@pytest.fixture
async def pg_url(pg_database: str) -> str:
    """A URL whose connections see only a fresh schema of their own (``search_path``)."""
    schema = await pg.create_schema(pg_database)
    return pg.url(pg_database, search_path=schema)


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
