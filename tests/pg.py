"""The real PostgreSQL the tests use, and a database of their own on it.

A test session creates one uniquely named database (``rath_test_<hex>``) on the server named by
``$RATH_TEST_PG`` (default: the machine's PostgreSQL, ``postgresql://postgres@127.0.0.1:5432``)
and drops it at the end; each test gets a schema of its own inside it (the URL carries
``search_path``), so tests never see each other's tables. Without a reachable server a PostgreSQL
test skips, saying why, on a developer machine, and FAILS under CI (``CI=true``, set by .ci/run,
which starts or installs PostgreSQL first).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from tests.needs import unavailable

SERVER = os.environ.get("RATH_TEST_PG", "postgresql://postgres@127.0.0.1:5432")
HOW_TO_START = (
    "set RATH_TEST_PG to a server, or start the machine's: pg_ctlcluster --skip-systemctl-redirect 15 main start"
)


def url(database: str, **params: str) -> str:
    """The server's URL for ``database``, with query parameters (asyncpg passes unknown ones as settings)."""
    parts = urlsplit(SERVER)
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, query, ""))


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(url("postgres"), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def reachable() -> str | None:
    """None when the server answers, else why not."""

    async def probe() -> None:
        conn = await asyncpg.connect(url("postgres"), timeout=5)
        await conn.close()

    try:
        asyncio.run(probe())
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def require_postgres() -> None:
    """Skip (developer machine) or fail (CI) when the server cannot be reached."""
    why = reachable()
    if why is not None:
        unavailable(f"a PostgreSQL server at {SERVER} ({why})", HOW_TO_START)


def create_database() -> str:
    """Create a uniquely named database; returns its name."""
    name = f"rath_test_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    return name


def drop_database(name: str) -> None:
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def create_schema(database: str) -> str:
    """A fresh schema in ``database``; returns its name."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(url(database), timeout=5)
    try:
        await conn.execute(f'CREATE SCHEMA "{name}"')
    finally:
        await conn.close()
    return name
