"""The schema a store's migrations make, read back from the database in a form two stores can be compared by.

SQLite: each table's columns (declared type, NOT NULL, default, primary-key position), WITHOUT ROWID,
AUTOINCREMENT, foreign keys, and indexes (columns with their order, unique, partial WHERE); triggers by
their SQL. PostgreSQL: ``information_schema.columns`` (type, collation, nullability, default,
identity), every constraint (``pg_get_constraintdef``) and every index (``pg_indexes.indexdef``).
Names the database makes up (SQLite's ``sqlite_autoindex_*``) are left out; what they index is kept.

``python -m tests.store.schema_shape`` prints both shapes as JSON: ``schema_before.json`` was written
by it before the schema became one description (``runtime/store/core/schema.py``).
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import sys
from typing import Any

import asyncpg

Shape = dict[str, Any]


def _squash(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()


def sqlite_shape(conn: sqlite3.Connection) -> Shape:
    """The tables, indexes and triggers of an SQLite database (``schema_migrations`` excluded)."""
    tables: Shape = {}
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    for name, sql in sorted(rows):
        if name == "schema_migrations":
            continue
        wr = conn.execute("SELECT wr FROM pragma_table_list WHERE name = ?", (name,)).fetchone()[0]
        indexes = {}
        for _, index, unique, origin, partial in conn.execute(f"PRAGMA index_list({name})"):
            cols = [(r[2], r[3]) for r in conn.execute(f"PRAGMA index_xinfo({index})") if r[5]]
            where = partial and conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (index,)).fetchone()[0]
            key = index if not index.startswith("sqlite_autoindex_") else f"{origin}:{cols}"
            indexes[key] = {
                "columns": cols,
                "unique": unique,
                "origin": origin,
                "where": _squash(where.split(" WHERE ", 1)[1]) if partial else None,
            }
        tables[name] = {
            "columns": [list(r[1:6]) for r in conn.execute(f"PRAGMA table_xinfo({name})")],
            "without_rowid": bool(wr),
            "autoincrement": "AUTOINCREMENT" in sql.upper(),
            "foreign_keys": sorted(list(r[2:5]) for r in conn.execute(f"PRAGMA foreign_key_list({name})")),
            "indexes": dict(sorted(indexes.items())),
        }
    triggers = {n: _squash(s) for n, s in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")}
    return {"tables": tables, "triggers": dict(sorted(triggers.items()))}


async def pg_shape(conn: asyncpg.Connection) -> Shape:
    """The tables, constraints and indexes of the connection's current schema (``schema_migrations`` excluded)."""
    schema = await conn.fetchval("SELECT current_schema()")
    tables: Shape = {}
    for r in await conn.fetch(
        "SELECT table_name, column_name, data_type, collation_name, is_nullable, column_default, is_identity,"
        " identity_generation FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name != 'schema_migrations' ORDER BY table_name, ordinal_position"
    ):
        table = tables.setdefault(r[0], {"columns": [], "constraints": {}, "indexes": {}})
        table["columns"].append(list(r[1:]))
    for r in await conn.fetch(
        "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint k"
        " JOIN pg_class c ON c.oid = k.conrelid WHERE c.relnamespace = current_schema()::regnamespace"
        " AND c.relname != 'schema_migrations' ORDER BY 1, 2"
    ):
        tables[r[0]]["constraints"][r[1]] = r[2]
    for r in await conn.fetch(
        "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        " AND tablename != 'schema_migrations' ORDER BY 1, 2"
    ):
        tables[r[0]]["indexes"][r[1]] = r[2].replace(f"{schema}.", "").replace(f'"{schema}".', "")
    return {"tables": dict(sorted(tables.items()))}


async def _pg(url: str, migrations: list[Any]) -> Shape:
    from runtime.store.postgres import migrations as pg_migrations

    await pg_migrations.apply(url, migrations)
    conn = await asyncpg.connect(url)
    try:
        return await pg_shape(conn)
    finally:
        await conn.close()


def current(pg_url: str) -> Shape:
    """Both backends' shapes as today's migrations make them, with the names of those migrations."""
    from runtime.store.postgres.schema import ALL
    from runtime.store.sqlite.migrate import apply_migrations
    from runtime.store.sqlite.migrations import ALL_MIGRATIONS

    conn = sqlite3.connect(":memory:", isolation_level=None)
    apply_migrations(conn, ALL_MIGRATIONS)
    return {
        "sqlite": {"migrations": [m.name for m in ALL_MIGRATIONS], "shape": sqlite_shape(conn)},
        "postgres": {"migrations": [m.name for m in ALL], "shape": asyncio.run(_pg(pg_url, ALL))},
    }


if __name__ == "__main__":
    from tests import pg

    database = pg.create_database()
    try:
        url = pg.url(database, search_path=asyncio.run(pg.create_schema(database)))
        json.dump(current(url), sys.stdout, indent=1)
    finally:
        pg.drop_database(database)
