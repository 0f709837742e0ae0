"""The ``backend`` fixture every contract suite runs on: each store backend this build has, opened fresh.

A backend joins by adding its name to ``BACKENDS`` and a branch to ``open_test_backend`` (the
PostgreSQL one makes a database of its own per test session and drops it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from runtime.backend import StoreBackend
from runtime.store import open_backend, parse_store_url

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
