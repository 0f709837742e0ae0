"""The ``MemoryStore`` contract, run on every backend: writes, replacement, recall by BM25, scans, ids.

Recall is checked for what any BM25 store must give (the item sharing the rare term first, only
items sharing a term, a tenant/project's statistics its own, superseded items out of the index),
not for one backend's exact scores; ``tests/memory`` holds the SQLite store to rank-bm25's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import pytest

from runtime.errors import StoreError
from runtime.memory import text
from runtime.memory.model import MemoryItem
from runtime.memory.store import SUPERSEDED, MemoryStore, NewMemory
from runtime.store.core.memory import CoreMemoryStore
from runtime.store.postgres import recall as pg_recall
from runtime.store.postgres.executor import PostgresExecutor
from runtime.store.postgres.schema import MEMORY
from tests.store.contracts.conftest import BACKENDS, open_postgres, open_test_backend, postgres_dsn

pytestmark = pytest.mark.anyio


Memories = Callable[[str], MemoryStore]  # a store of the same database for a project


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def dsn(kind: str, request: pytest.FixtureRequest) -> str | None:
    return postgres_dsn(request) if kind == "postgresql" else None


@pytest.fixture
async def memories(kind: str, dsn: str | None, tmp_path: Path) -> AsyncIterator[Memories]:
    if dsn is not None:
        async with open_postgres(dsn, MEMORY) as db:
            yield lambda project: CoreMemoryStore(PostgresExecutor(db), pg_recall, "local", project)
        return
    async with open_test_backend(kind, tmp_path) as backend:
        yield lambda project: backend.memory("local", project)


def memory(memories: Memories, project: str = "default") -> MemoryStore:
    return memories(project)


def item(uri: str, content: str, scope: str = "user", **kw: object) -> NewMemory:
    return NewMemory(uri=uri, scope=scope, content=content, **kw)  # type: ignore[arg-type]


async def recall(store: MemoryStore, query: str, k: int = 10, scope: str | None = None) -> list[str]:
    return [f.item.uri for f in await store.search(text.query_terms(query), k, scope)]


async def test_items_read_back_by_id_and_uri_and_a_write_at_a_uri_replaces_it(memories: Memories) -> None:
    store = memory(memories)
    (first,) = await store.put([item("memory://user/a", "the cat sat", tags=("pets",), source="ses_1")])
    assert (first.uri, first.scope, first.content, first.tags, first.source) == (
        "memory://user/a", "user", "the cat sat", ("pets",), "ses_1"
    )  # fmt: skip
    assert await store.get(first.id) == first and await store.at("memory://user/a") == first
    (again,) = await store.put([item("memory://user/a", "the dog ran")])
    assert again.id == first.id and again.created_at == first.created_at and again.content == "the dog ran"
    assert await recall(store, "cat") == [] and await recall(store, "dog") == ["memory://user/a"]
    assert await store.get("mem_nope") is None and await store.at("memory://user/none") is None
    assert await memory(memories, "other").get(first.id) is None


async def test_recall_ranks_by_bm25_within_its_own_scope(memories: Memories) -> None:
    store = memory(memories)
    await store.put(
        [
            item("memory://user/1", "postgres replication lag alarm"),
            item("memory://user/2", "postgres backup schedule"),
            item("memory://user/3", "postgres vacuum tuning"),
            item("memory://agent/4", "the weather is fine", scope="agent"),
            item("memory://user/5", "猫が好きです 我喜欢猫"),
        ]
    )
    await memory(memories, "other").put([item("memory://user/x", "replication replication replication")])
    found = await store.search(text.query_terms("replication postgres"), 10, None)
    assert found[0].item.uri == "memory://user/1"  # the only one with the rare term
    assert {f.item.uri for f in found} == {"memory://user/1", "memory://user/2", "memory://user/3"}
    assert all(f.score > 0 for f in found) and [f.score for f in found] == sorted(
        (f.score for f in found), reverse=True
    )
    assert await recall(store, "replication postgres", k=1) == ["memory://user/1"]
    assert await recall(store, "weather", scope="user") == [] and await recall(store, "weather", scope="agent") == [
        "memory://agent/4"
    ]
    assert await recall(store, "猫") == ["memory://user/5"]
    assert await recall(store, "nothing matches") == [] and await store.search([], 5, None) == []
    assert await recall(memory(memories, "other"), "postgres") == []
    assert await recall(memory(memories, "empty"), "postgres") == []


async def test_superseded_items_stay_readable_but_leave_the_index(memories: Memories) -> None:
    store = memory(memories)
    await store.put([item("memory://session/old", "transcript about deployments")])
    await store.put(
        [item("memory://session/new", "transcript about deployments, later")], supersede=["memory://session/old"]
    )
    old = await store.at("memory://session/old")
    assert old is not None and SUPERSEDED in old.tags
    assert await recall(store, "deployments") == ["memory://session/new"]
    await store.put([], supersede=["memory://session/old", "memory://session/absent"])  # again, and unknown: fine
    assert (await store.at("memory://session/old")).tags.count(SUPERSEDED) == 1  # type: ignore[union-attr]


async def test_once_per_scope_keeps_the_item_already_holding_the_same_content(memories: Memories) -> None:
    store = memory(memories)
    (kept,) = await store.put([item("memory://user/f1", "likes tea", once_per_scope=True)])
    (same,) = await store.put([item("memory://user/f2", "likes tea", once_per_scope=True)])
    assert same.id == kept.id and await store.at("memory://user/f2") is None
    (other,) = await store.put([item("memory://agent/f3", "likes tea", scope="agent", once_per_scope=True)])
    assert other.id != kept.id


async def test_scans_deletes_and_id_search(memories: Memories) -> None:
    store = memory(memories)
    made = [(await store.put([item(f"memory://resources/doc/{i}", f"document {i}")]))[0] for i in range(4)]
    (other,) = await store.put([item("memory://resources/other", "other")])
    docs = await store.scan("memory://resources/doc/", 10)
    assert [m.uri for m in docs] == [f"memory://resources/doc/{i}" for i in range(4)]
    assert [m.uri for m in await store.scan("memory://resources/doc/", 2, after=docs[0].uri)] == [
        d.uri for d in docs[1:3]
    ]
    ids = [m.id for m in made]
    # Newest first, by id: ids made in one millisecond order by their random part, so the expected
    # order is the ids' own, not the order they were made in.
    assert await store.ids("", 100) == sorted([*ids, other.id], reverse=True)
    assert await store.ids(ids[2], 10) == [ids[2]]
    assert await memory(memories, "other").ids("", 10) == []
    assert await store.delete(memory_id=ids[0]) == 1 and await store.get(ids[0]) is None
    assert await store.delete(uri="memory://resources/doc/1") == 1
    assert await store.delete(prefix="memory://resources/doc/") == 2
    assert await store.delete(prefix="memory://resources/doc/") == 0
    assert await recall(store, "document") == [] and await recall(store, "other") == ["memory://resources/other"]
    assert await memory(memories, "empty").delete(prefix="memory://") == 0


async def test_a_write_of_several_items_is_all_or_none(memories: Memories) -> None:
    store = memory(memories)
    with pytest.raises(Exception):  # noqa: B017 - any refusal will do: what matters is that nothing stays
        await store.put([item("memory://user/ok", "fine"), item("memory://user/bad", "x", scope=None)])  # type: ignore[arg-type]
    assert await store.at("memory://user/ok") is None and await recall(store, "fine") == []


async def test_concurrent_writers_lose_no_item_and_no_index_entry(memories: Memories) -> None:
    store = memory(memories)

    async def put(i: int) -> None:
        await store.put([item(f"memory://user/c{i}", f"shared marker{i} 共有{i}")])
        await store.put([item("memory://user/same", f"version common{i}")])

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(put, i)
    found = await store.search(text.query_terms("shared"), 100, None)
    assert sorted(f.item.uri for f in found) == sorted(f"memory://user/c{i}" for i in range(12))
    assert len({round(f.score, 9) for f in found}) == 1  # twelve items alike: one score, so one N and one df
    for i in range(12):
        assert await recall(store, f"marker{i}") == [f"memory://user/c{i}"]
    last = await store.at("memory://user/same")
    assert last is not None and await recall(store, "version") == ["memory://user/same"]
    assert await recall(store, last.content.split()[1]) == ["memory://user/same"]  # only its latest terms
    assert len(await store.scan("memory://user/", 100)) == 13


async def test_one_write_at_a_uri_twice_keeps_the_last_and_an_id_held_elsewhere_is_refused(memories: Memories) -> None:
    store = memory(memories)
    first, second = await store.put([item("memory://user/twice", "alpha words"), item("memory://user/twice", "beta")])
    assert (
        second.id == first.id
        and await recall(store, "alpha") == []
        and await recall(store, "beta") == ["memory://user/twice"]
    )
    with pytest.raises(StoreError, match=f"{first.id} exists already"):
        await store.put([item("memory://user/fresh", "gamma"), item("memory://user/other", "delta", id=first.id)])
    assert await store.at("memory://user/fresh") is None and await recall(store, "gamma") == []
    assert await store.at("memory://user/twice") == second


async def test_the_tree_lists_one_level_with_counts_in_uri_order_and_pages(memories: Memories) -> None:
    store = memory(memories)
    uris = ["a", "b/x", "b/y", "b/z/deep", "c", "d/q", "zz"]
    await store.put([item(f"memory://user/{u}", f"body {u}") for u in uris])
    await store.put([item("memory://agent/note", "agent", scope="agent")])
    await memories("other").put([item("memory://user/b/mine", "another project's")])

    def shown(entries: list[tuple[str, MemoryItem | int, str]]) -> list[tuple[str, str | int]]:
        return [(key, e if isinstance(e, int) else e.uri) for key, e, _ in entries]

    everything = shown(await store.tree("memory://user/", None, 100))
    assert everything == [
        ("memory://user/a", "memory://user/a"),
        ("memory://user/b/", 3),
        ("memory://user/c", "memory://user/c"),
        ("memory://user/d/", 1),
        ("memory://user/zz", "memory://user/zz"),
    ]
    assert shown(await store.tree("memory://", None, 100)) == [("memory://agent/", 1), ("memory://user/", 7)]
    assert shown(await store.tree("memory://user/b/", None, 100))[-1] == ("memory://user/b/z/", 1)
    pages, after = [], None  # two at a time, resuming after a child prefix or an item
    while page := await store.tree("memory://user/", after, 2):
        pages.append(shown(page))
        after = page[-1][0]
    assert [e for p in pages for e in p] == everything and [len(p) for p in pages] == [2, 2, 1]
