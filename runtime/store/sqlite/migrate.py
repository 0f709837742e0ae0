"""Applying migrations to an open connection: what opening a store does, and what ``health`` does on an
empty in-memory database to learn the schema they make (its own module, so neither imports the other)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from runtime.ids import now
from runtime.store.migration import Migration


def apply_migrations(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[str]:
    """Apply the migrations not yet recorded, in order, under the database write lock."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        done: list[str] = []
        for migration in unapplied(conn, migrations):
            for statement in _statements(migration.sql):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)", (migration.name, now()))
            done.append(migration.name)
        conn.execute("COMMIT")
        return done
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def table_names(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def applied_names(conn: sqlite3.Connection) -> set[str]:
    """The names of the migrations the database on ``conn`` has applied (none when it has no ``schema_migrations``)."""
    if "schema_migrations" not in table_names(conn):
        return set()
    return {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}


def unapplied(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[Migration]:
    """Those of ``migrations`` the database on ``conn`` has not applied, in order."""
    applied = applied_names(conn)
    return [m for m in migrations if m.name not in applied]


def _statements(sql: str) -> list[str]:
    """Split a migration script into statements (``sqlite3.complete_statement`` knows triggers)."""
    out: list[str] = []
    current = ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                out.append(current.strip())
            current = ""
    if current.strip():
        out.append(current.strip())
    return out
