"""Both backends' schemas come from one description (``runtime/store/core/schema.py``) and are what the
hand-written DDL of each backend made before it: a fresh store, migrated through the migrations released
when ``schema_before.json`` was taken, reads back the same tables, columns, types, keys and indexes.

Migrations added since are left out (their names are not in the snapshot), so adding one never touches
the snapshot; their order must keep the released names where they were.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from runtime.store.core.schema import Col
from runtime.store.migration import Migration
from runtime.store.postgres import migrations as pg_migrations
from runtime.store.postgres.schema import ALL as PG_MIGRATIONS
from runtime.store.sqlite.migrate import apply_migrations
from runtime.store.sqlite.migrations import ALL_MIGRATIONS
from tests import pg
from tests.store.schema_shape import pg_shape, sqlite_shape

BEFORE = json.loads((Path(__file__).parent / "schema_before.json").read_text())


def released(migrations: list[Migration], backend: str) -> list[Migration]:
    """The migrations that were released when the snapshot was taken, checked to be still in their order."""
    names = BEFORE[backend]["migrations"]
    kept = [m for m in migrations if m.name in names]
    assert [m.name for m in kept] == names, "a released migration was renamed, removed or moved"
    return kept


def _diff(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    tables = sorted(set(got["tables"]) | set(want["tables"]))
    return [t for t in tables if got["tables"].get(t) != want["tables"].get(t)]


def test_a_fresh_sqlite_store_has_the_schema_the_released_ddl_made() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    apply_migrations(conn, released(ALL_MIGRATIONS, "sqlite"))
    shape = json.loads(json.dumps(sqlite_shape(conn)))  # as the snapshot holds it: lists, not tuples
    assert _diff(shape, BEFORE["sqlite"]["shape"]) == []
    assert shape == BEFORE["sqlite"]["shape"]


@pytest.mark.anyio
async def test_a_fresh_postgres_store_has_the_schema_the_released_ddl_made(pg_database: str) -> None:
    url = pg.url(pg_database, search_path=await pg.create_schema(pg_database))
    await pg_migrations.apply(url, released(PG_MIGRATIONS, "postgres"))
    conn = await asyncpg.connect(url)
    try:
        shape = json.loads(json.dumps(await pg_shape(conn)))
    finally:
        await conn.close()
    assert _diff(shape, BEFORE["postgres"]["shape"]) == []
    assert shape == BEFORE["postgres"]["shape"]


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("tenant txt", "type 'txt' is none of id, text, json"),
        ("tenant text nullable", "'nullable' is not null, unique, key, default N or references"),
    ],
)
def test_a_column_written_wrong_says_what_is_wrong(spec: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        Col.parse(spec)
