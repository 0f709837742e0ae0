"""The store every schedules test runs on: a fresh SQLite file, or a fresh migrated PostgreSQL schema."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from runtime.store import StoreURL
from tests.store.contracts.conftest import fresh_store_url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> StoreURL:
    url = fresh_store_url(request.param, tmp_path, request)
    if url.scheme == "postgresql":
        from runtime.store.postgres import backend as postgres

        anyio.run(postgres.migrate, url)
    return url
