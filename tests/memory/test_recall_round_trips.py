"""On PostgreSQL a read of one statement runs alone (one round trip), and an operation once found to
run two is read in a transaction from then on (BEGIN and COMMIT: three round trips, four for two
statements). A recall's reads stay single statements even when the process has not yet learned its
space's id: the keyword search and the index's refresh of vectors (issue 30)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import Runtime
from runtime.memory.semantic import Semantic
from runtime.memory.service import MemoryService
from runtime.memory.store import NewMemory
from runtime.store.core import memory as core_memory
from runtime.store.core import vectors as core_vectors
from tests.memory.test_semantic_overlap import FACTS, Gated
from tests.store.contracts.conftest import postgres_dsn

pytestmark = pytest.mark.anyio


@pytest.fixture
def store(request: pytest.FixtureRequest) -> str:
    return postgres_dsn(request)


async def test_a_first_hybrid_recall_reads_in_single_statements(home: Path, store: str) -> None:
    from runtime.store.postgres import backend as postgres
    from runtime.store.url import parse_store_url

    await postgres.migrate(parse_store_url(store))
    embedder = Gated()
    embedder.release.set()
    async with Runtime.open(home, store=store, workers=0, embedder="none") as writer:  # another process's items
        await writer.memory.store.put([NewMemory(f"memory://user/{i}", "user", f) for i, f in enumerate(FACTS)])
        await Semantic(embedder).embed_pending(writer.memory.store.vectors())
    async with Runtime.open(home, store=store, workers=0, embedder="none") as rt:
        memory = MemoryService(rt.memory.store, rt.memory.sessions, Semantic(embedder))
        hits = await memory.recall("the sofa", k=3, mode="hybrid")  # this process's first read of the space
        assert "the cat sleeps on the sofa" in {h.snippet for h in hits}
        several = rt.memory.store.ex.db.several_reads  # type: ignore[attr-defined]
        assert core_memory.search not in several and core_vectors.since not in several
        assert core_vectors.current not in several
