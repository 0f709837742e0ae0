"""The fixture every PostgreSQL test under tests/store shares: this test session's own database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import pg


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
