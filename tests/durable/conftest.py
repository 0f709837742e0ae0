"""Fixtures of the durable tests: a runtime with the test workflows registered."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from runtime import Runtime
from runtime.store import parse_store_url
from runtime.store.postgres import backend as postgres
from tests import pg

T = TypeVar("T")
FLOWS = "tests.durable.flows"
ROOT = Path(__file__).resolve().parents[2]
# An hour: no test of ``drt`` waits for a lease to run out, and with 1 s leases each one depended on
# every renewal (a write, every third of a lease) landing in time: an event loop held up for ~0.7 s on
# a loaded machine could let the reaper requeue a run mid-step, and the step would run again. Short
# leases and their renewals are tested where they are the point (test_effects' reconciliation test,
# tests/store/postgres).
LEASE_S = 3600.0


@pytest.fixture
async def drt(home: Path) -> AsyncIterator[Runtime]:
    """A runtime with 4 workers, hour-long leases and the test workflows."""
    async with Runtime.open(home, lease_s=LEASE_S) as runtime:
        runtime.workflows.load(FLOWS)
        yield runtime


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> str | None:
    """The store a test's runtimes and processes share: the home's SQLite file (None), or a fresh,
    migrated PostgreSQL schema (its URL)."""
    if request.param == "sqlite":
        return None
    database = request.getfixturevalue("pg_database")
    url = pg.url(database, search_path=asyncio.run(pg.create_schema(database)))
    asyncio.run(postgres.migrate(parse_store_url(url)))
    return url


@pytest.fixture
def log(tmp_path: Path) -> str:
    """Path of the effect log file the test workflows append to."""
    return str(tmp_path / "effects.log")


async def eventually(check: Callable[[], Awaitable[T | None]], timeout: float = 60.0, what: str = "") -> T:
    """Poll ``check`` until it returns something truthy (for changes made by another process); ``timeout``
    is a safety net for a change that never comes, never a measure (a loaded machine may take seconds)."""
    with anyio.fail_after(timeout):
        while True:
            value = await check()
            if value:
                return value
            await anyio.sleep(0.05)
    raise AssertionError(what)  # pragma: no cover


def spawn(*args: str, **kw: Any) -> subprocess.Popen[str]:
    """Start ``python -m tests.durable.proc ARGS`` (a real process on the same store)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.durable.proc", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )
