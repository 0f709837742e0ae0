"""The store every schedules test runs on: a fresh SQLite file, or a fresh migrated PostgreSQL schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.store import StoreURL
from tests.store.contracts.conftest import migrated_store_url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> StoreURL:
    return migrated_store_url(request.param, tmp_path, request)
