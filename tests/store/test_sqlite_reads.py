"""How ``SQLiteDatabase`` ends a read's transaction (runtime/store/sqlite/database.py, ``_in_snapshot``):
a connection's own tables made by a read stay for its next reads; rows a read changed are undone."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.store.migration import Migration
from runtime.store.sqlite.database import SQLiteDatabase

pytestmark = pytest.mark.anyio
TABLE = [Migration("0001_t", "CREATE TABLE t (x INTEGER)")]


async def test_a_temp_table_made_by_a_read_is_kept_for_the_next_read(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "s.db")
    await db.open(TABLE)
    try:
        # lookup() reads on the event loop's one connection: the second read sees what the first made.
        await db.lookup(lambda c: c.execute("CREATE TEMP TABLE IF NOT EXISTS kept (x INTEGER)"))
        names = await db.lookup(lambda c: c.execute("SELECT name FROM temp.sqlite_master").fetchall())
        assert [tuple(r) for r in names] == [("kept",)]
    finally:
        await db.close()


async def test_rows_a_read_changed_are_rolled_back(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "s.db")
    await db.open(TABLE)
    try:
        await db.lookup(lambda c: c.execute("INSERT INTO t (x) VALUES (1)"))
        await db.read(lambda c: c.execute("INSERT INTO t (x) VALUES (2)"))
        assert await db.read(lambda c: c.execute("SELECT count(*) FROM t").fetchone()[0]) == 0
    finally:
        await db.close()
