"""Migrations on the real server: order, records, the advisory lock, failures, a runtime identity without DDL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import anyio
import asyncpg
import pytest

from runtime.errors import StoreError
from runtime.store.migration import Migration
from runtime.store.postgres import migrations, schema
from runtime.store.postgres.migrations import MigrationsPending

pytestmark = pytest.mark.anyio

STEPS = [
    Migration("0001_a", "CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);"),
    Migration("0002_b", "CREATE TABLE b (y TEXT); ALTER TABLE a ADD COLUMN z TEXT;"),
]


async def _fetch(url: str, sql: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return list(await conn.fetch(sql))
    finally:
        await conn.close()


async def test_pending_then_apply_then_nothing_pending(pg_url: str) -> None:
    assert await migrations.pending(pg_url, STEPS) == ["0001_a", "0002_b"]
    with pytest.raises(MigrationsPending, match=r"2 migration\(s\) pending .*run `rath-mcp migrate --store postgresql"):
        await migrations.require_current(pg_url, STEPS)
    assert await migrations.apply(pg_url, STEPS[:1]) == ["0001_a"]
    assert await migrations.pending(pg_url, STEPS) == ["0002_b"]
    assert await migrations.apply(pg_url, STEPS) == ["0002_b"]
    assert await migrations.apply(pg_url, STEPS) == []
    await migrations.require_current(pg_url, STEPS)
    rows = await _fetch(pg_url, "SELECT name FROM schema_migrations ORDER BY name")
    assert [r[0] for r in rows] == ["0001_a", "0002_b"]


async def test_concurrent_migrators_apply_each_migration_once(pg_url: str) -> None:
    """Four migrators at once: the advisory lock queues them, and each migration runs once (a
    second run of 0001_a would insert a second row into ``a``)."""
    results: list[list[str]] = []

    async def migrate() -> None:
        results.append(await migrations.apply(pg_url, STEPS))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(migrate)
    assert sorted(results, key=len) == [[], [], [], ["0001_a", "0002_b"]]
    assert len(await _fetch(pg_url, "SELECT * FROM a")) == 1


async def test_a_failing_migration_leaves_no_trace_and_is_not_recorded(pg_url: str) -> None:
    bad = [*STEPS, Migration("0003_bad", "CREATE TABLE c (x INTEGER); SELECT no_such_function();")]
    with pytest.raises(StoreError, match="migration 0003_bad failed and was rolled back"):
        await migrations.apply(pg_url, bad)
    assert await migrations.pending(pg_url, bad) == ["0003_bad"]
    assert (await _fetch(pg_url, "SELECT to_regclass('c') IS NULL AS gone"))[0]["gone"]


async def test_a_store_migrated_by_a_newer_version_is_refused(pg_url: str) -> None:
    await migrations.apply(pg_url, STEPS)
    with pytest.raises(StoreError, match=r"does not know .*0002_b.*newer version"):
        await migrations.pending(pg_url, STEPS[:1])


async def test_the_pending_check_of_an_unreachable_store_says_so() -> None:
    with anyio.fail_after(10):
        with pytest.raises(StoreError, match="unreachable"):
            await migrations.pending("postgresql://postgres@127.0.0.1:9/x", STEPS)


async def test_every_pg_table_migration_applies_on_a_fresh_schema(pg_url: str) -> None:
    assert await migrations.apply(pg_url, schema.ALL) == [m.name for m in schema.ALL]
    tables = {r[0] for r in await _fetch(pg_url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
    assert {"sessions", "segments", "chunks", "runs", "run_events", "memory_items", "memory_postings"} <= tables


@pytest.fixture
async def runtime_role(pg_url: str) -> AsyncIterator[str]:
    """A URL for a login role that may read and write the tables but run no DDL (the runtime identity)."""
    role = f"rath_rt_{uuid.uuid4().hex[:8]}"
    schema_name = pg_url.split("search_path=")[1]
    admin = await asyncpg.connect(pg_url)
    try:
        await admin.execute(f'CREATE ROLE "{role}" LOGIN')
        await admin.execute(f'GRANT USAGE ON SCHEMA "{schema_name}" TO "{role}"')
        await admin.execute(
            f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{schema_name}" GRANT SELECT, INSERT ON TABLES TO "{role}"'
        )
        parts = urlsplit(pg_url)
        yield urlunsplit((parts.scheme, f"{role}@{parts.hostname}:{parts.port}", parts.path, parts.query, ""))
    finally:
        await admin.execute(f'DROP OWNED BY "{role}"')
        await admin.execute(f'DROP ROLE "{role}"')
        await admin.close()


async def test_the_runtime_identity_checks_without_ddl_rights_and_cannot_migrate(
    pg_url: str, runtime_role: str
) -> None:
    assert await migrations.pending(runtime_role, STEPS) == ["0001_a", "0002_b"]  # no table yet: all pending
    with pytest.raises(StoreError, match="needs DDL rights"):
        await migrations.apply(runtime_role, STEPS)
    await migrations.apply(pg_url, STEPS)  # the migrating identity does it
    assert await migrations.pending(runtime_role, STEPS) == []
    await migrations.require_current(runtime_role, STEPS)
