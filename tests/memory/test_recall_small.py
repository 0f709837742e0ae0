"""A keyword recall known small runs on the event loop's connection (``recall.search_small``) and returns
exactly what the reader thread's recall returns; past its bounds it declines.

A real store file written through the runtime. Each query is searched both ways in the store's own
executor: ``Executor.lookup`` with ``small`` (the bounded statements, on the loop's connection) and
``Executor.read`` (the reader thread's statements). Rare words must be taken small (or this would
compare the thread with itself), and then give the same items, order and scores; words with more
postings than the bound, and items holding more text than the budget, must be declined (None), and
the store's ``search`` then still answers from the reader.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from runtime import Runtime
from runtime.memory.store import NewMemory
from runtime.memory.text import query_terms
from runtime.store.core import memory as core_memory
from runtime.store.core.memory import CoreMemoryStore
from runtime.store.sqlite import recall

pytestmark = pytest.mark.anyio

VOCAB = [f"w{i}" for i in range(600)]
ZIPF = [1 / (i + 1) for i in range(len(VOCAB))]


async def test_a_small_recall_on_the_loop_equals_the_readers(tmp_path: Path) -> None:
    rnd = random.Random(11)
    docs = [" ".join(rnd.choices(VOCAB, ZIPF, k=rnd.randint(20, 60))) for _ in range(1500)]
    async with Runtime.open(tmp_path / "home", embedder="none") as rt:
        store = rt.memory.store
        assert isinstance(store, CoreMemoryStore)
        await store.put(
            [
                NewMemory(f"memory://{'agent' if i % 3 else 'user'}/d{i}", "agent" if i % 3 else "user", d)
                for i, d in enumerate(docs)
            ]
        )
        rare = [" ".join(rnd.sample(VOCAB[150:600], 3)) for _ in range(20)]
        common = [" ".join(rnd.sample(VOCAB[:5], 2)) for _ in range(5)]
        taken = 0
        for query in rare + common:
            for k, scope in ((1, None), (10, None), (50, None), (10, "agent")):
                args = (store.recall, store.tenant, store.project, None, query_terms(query), k, scope)
                _, small = await store.ex.lookup(core_memory.search, *args, True)
                _, read = await store.ex.read(core_memory.search, *args)
                assert read is not None
                if query in common:
                    assert small is None, query  # thousands of postings: never on the loop
                    continue
                assert small is not None, query
                taken += 1
                assert [(f.item, f.score) for f in small] == [(f.item, f.score) for f in read]
                assert read, query  # rare words still match something: not an empty comparison
        assert taken == 80
        assert [f.item.id for f in await store.search(query_terms(common[0]), 10, None)]  # declined: the reader


async def test_items_holding_more_text_than_the_budget_are_read_on_a_reader(tmp_path: Path) -> None:
    async with Runtime.open(tmp_path / "home", embedder="none") as rt:
        store = rt.memory.store
        assert isinstance(store, CoreMemoryStore)
        long = "needle " + "hay " * (recall.SMALL_CHARS // 4)  # one item past the budget on its own
        await store.put([NewMemory("memory://user/long", "user", long), NewMemory("memory://user/s", "user", "needle")])
        args = (store.recall, store.tenant, store.project, None, ["needle"], 10, None)
        _, small = await store.ex.lookup(core_memory.search, *args, True)
        assert small is None
        _, small = await store.ex.lookup(core_memory.search, *args[:-2], 1, None, True)  # the short one alone
        assert small is not None and [f.item.uri for f in small] == ["memory://user/s"]
        found = await store.search(["needle"], 10, None)
        assert [f.item.uri for f in found] == ["memory://user/s", "memory://user/long"]
        assert found[1].item.content == long
