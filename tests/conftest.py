"""Shared fixtures. Tests run on asyncio through anyio's pytest plugin (``@pytest.mark.anyio``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from runtime import Runtime
from tests import pg


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh runtime home directory."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
async def rt(home: Path) -> AsyncIterator[Runtime]:
    """A runtime opened on a fresh home (default tenant/project)."""
    async with Runtime.open(home) as runtime:
        yield runtime


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """The name of this test session's own PostgreSQL database (tests/pg.py), dropped at the end.

    Asked for only by tests that use PostgreSQL, so a SQLite-only run never needs a server."""
    pg.require_postgres()
    name = pg.create_database()
    try:
        yield name
    finally:
        pg.drop_database(name)
