"""The PostgreSQL memory store scores exactly as the SQLite store does, for the same items and queries.

Both stores get one corpus of Latin, Chinese and Japanese text (written in a few puts, with an item
replaced and one superseded, so the statistics have moved); every query must return the same items
in the same order with the same scores (to float rounding).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from runtime.memory import text
from runtime.memory.store import MemoryStore, NewMemory
from runtime.store import open_backend, parse_store_url
from runtime.store.core.memory import CoreMemoryStore
from runtime.store.postgres import PostgresDatabase, migrations, recall
from runtime.store.postgres.executor import PostgresExecutor
from runtime.store.postgres.schema import MEMORY

pytestmark = pytest.mark.anyio

WORDS = ["memory", "durable", "agent", "lease", "commit", "数据库", "记忆", "检索", "データベース", "記憶", "東京"]
QUERIES = ["memory agent", "数据库 记忆", "データベース 検索", "東京の記憶", "lease commit 检索", "nothing"]


def corpus() -> list[NewMemory]:
    rnd = random.Random(3)
    return [
        NewMemory(
            uri=f"memory://user/{i}",
            scope="user" if i % 3 else "agent",
            content=" ".join(rnd.choices(WORDS, k=rnd.randint(2, 9))),
        )
        for i in range(60)
    ]


async def fill(store: MemoryStore) -> None:
    items = corpus()
    for start in range(0, len(items), 20):
        await store.put(items[start : start + 20])
    await store.put([NewMemory(uri="memory://user/4", scope="user", content="記憶 memory memory")])
    await store.put(
        [NewMemory(uri="memory://user/new", scope="user", content="agent 东京")], supersede=["memory://user/5"]
    )


async def test_the_same_items_score_the_same_on_postgresql_and_sqlite(
    db: PostgresDatabase, pg_url: str, tmp_path: Path
) -> None:
    await migrations.apply(pg_url, MEMORY)
    on_pg = CoreMemoryStore(PostgresExecutor(db), recall, "local", "default")
    sqlite = await open_backend(parse_store_url(f"sqlite://{tmp_path / 'scores.db'}"))
    try:
        on_sqlite = sqlite.memory("local", "default")
        await fill(on_pg)
        await fill(on_sqlite)
        for query in QUERIES:
            for scope in (None, "user"):
                terms = text.query_terms(query)
                a = await on_pg.search(terms, 15, scope)
                b = await on_sqlite.search(terms, 15, scope)
                assert [f.item.uri for f in a] == [f.item.uri for f in b], query
                assert [f.score for f in a] == pytest.approx([f.score for f in b], rel=1e-9), query
                assert query == "nothing" or a
    finally:
        await sqlite.close()
