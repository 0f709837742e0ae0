"""Searching ids by prefix (what completion uses): newest first, scoped to the tenant/project, bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import InvalidInputError, Runtime
from runtime.sessions import SessionService
from runtime.sessions.in_memory import InMemoryHome, InMemorySessionStore
from runtime.store.core.id_search import id_search_sql, prefix_bounds
from runtime.store.sqlite.backend import sqlite_database

pytestmark = pytest.mark.anyio


async def test_each_service_finds_its_ids_by_prefix_newest_first_within_its_scope(home: Path) -> None:
    async with Runtime.open(home, project="other", workers=0) as other:
        foreign = [
            (await other.sessions.create([{"kind": "user", "content": "x"}])).id,
            (await other.runs.start("echo", input={"message": "x"})).id,
            (await other.memory.remember("a foreign fact")).id,
        ]
    async with Runtime.open(home, workers=0) as rt:
        sessions, runs, memories = [], [], []
        for i in range(3):  # ids made one after another sort in that order (runtime/ids.py), in one millisecond too
            sessions.append((await rt.sessions.create([{"kind": "user", "content": str(i)}])).id)
            runs.append((await rt.runs.start("echo", input={"message": str(i)})).id)
            memories.append((await rt.memory.remember(f"fact number {i}")).id)
        for search, ids in ((rt.sessions.ids, sessions), (rt.runs.ids, runs), (rt.memory.ids, memories)):
            assert await search() == ids[::-1]
            assert await search(ids[0][:4], limit=2) == ids[:0:-1]
            assert await search(ids[1]) == [ids[1]]
            assert await search(ids[1] + "0") == []
            assert not set(await search()) & set(foreign)
            with pytest.raises(InvalidInputError, match="limit must be a whole number from 1 to 1000"):
                await search("", limit=0)
            with pytest.raises(InvalidInputError, match="prefix must be text of at most 100 characters"):
                await search("x" * 101)


async def test_the_in_memory_session_store_searches_ids_like_the_sqlite_one() -> None:
    sessions = SessionService(InMemorySessionStore(InMemoryHome(), "local", "default"))
    made = []
    for i in range(3):  # one after another: ids sort in that order (runtime/ids.py)
        made.append((await sessions.create([{"kind": "user", "content": str(i)}])).id)
    assert await sessions.ids() == made[::-1]
    assert await sessions.ids(made[2]) == [made[2]]
    assert await sessions.ids("ses_", limit=1) == [made[2]]


async def test_each_id_search_is_a_range_scan_on_an_index_not_a_sort(rt: Runtime) -> None:
    """Completion asks on every keystroke: no id search may scan and sort a whole tenant/project."""
    args = ("t", "p", *prefix_bounds("x_"), 101)
    for table, also in {"sessions": " AND stub = 0", "runs": "", "memory_items": ""}.items():
        sql = "EXPLAIN QUERY PLAN " + id_search_sql(table, also)  # the query the stores run
        plan = " | ".join(
            r[3] for r in await sqlite_database(rt.store).read(lambda c, q=sql: c.execute(q, args).fetchall())
        )
        assert "USING" in plan and "INDEX" in plan and "TEMP B-TREE" not in plan, (table, plan)
