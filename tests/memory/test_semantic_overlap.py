"""A hybrid recall's keyword search runs while its query is embedded, and starts only once the embedding
has begun (issue 30): started together, the reader thread's Python held the GIL the embedding thread
needed to get going, and the embedding began after the keyword search had ended. What is returned is
the two rankings fused, as when they ran one after the other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime import Runtime
from runtime.memory import text
from runtime.memory.embed import LocalEmbedder, _unit, local_available
from runtime.memory.semantic import Semantic, fuse
from runtime.memory.service import DEPTH, MemoryService
from runtime.memory.store import NewMemory
from tests.needs import unavailable

pytestmark = pytest.mark.anyio

FACTS = ["the cat sleeps on the sofa", "my cat is called Tom", "tea at five", "the dog barks", "a red sofa"]


class Gated:
    """An embedder with a query thread of its own, like the local one (``start_query``): a query's
    engine waits for ``release``, so whatever releases it ran while the query was being embedded."""

    model = "gated"

    def __init__(self) -> None:
        self.events: list[str] = []
        self.beside: list[bool] = []  # what each query was told: whether work of the caller runs beside it
        self.release = threading.Event()
        self.thread = ThreadPoolExecutor(1)

    def _vector(self, text: str) -> Any:
        return _unit(np.array([len(text) % 7 + 1, text.count("a") + 1, text.count("s") + 1, 1.0], dtype=np.float32))

    def passages(self, texts: Sequence[str]) -> Any:
        return np.stack([self._vector(t) for t in texts])

    def query(self, text: str) -> Any:
        return self._vector(text)

    def start_query(self, text: str, started: Callable[[], None] | None = None, *, beside: bool = False) -> Future[Any]:
        self.beside.append(beside)

        def run() -> Any:
            self.events.append("embedding")
            if started is not None:
                started()
            if not self.release.wait(60):  # a guard only: released at once by the test's own step
                raise AssertionError("nothing ran while the query was embedded")
            self.events.append("embedded")
            return self.query(text)

        return self.thread.submit(run)


async def _filled(rt: Runtime, embedder: Any) -> Semantic:
    await rt.memory.store.put([NewMemory(f"memory://user/{i}", "user", f) for i, f in enumerate(FACTS)])
    semantic = Semantic(embedder)
    await semantic.embed_pending(rt.memory.store.vectors())
    return semantic


async def test_the_work_beside_runs_while_the_query_is_embedded_once_it_has_begun(tmp_path: Path) -> None:
    embedder = Gated()
    async with Runtime.open(tmp_path, workers=0, embedder="none") as rt:
        semantic = await _filled(rt, embedder)

        async def beside() -> str:
            embedder.events.append("beside")
            embedder.release.set()
            return "done"

        hits, done = await semantic.search_beside(rt.memory.store, ("local", "default"), "sofa", 3, None, beside)
    assert embedder.events == ["embedding", "beside", "embedded"]
    assert done == "done" and len(hits) == 3
    assert embedder.beside == [True]  # the query was told to leave a core to the work beside


async def test_a_hybrid_recall_is_the_two_rankings_fused(tmp_path: Path) -> None:
    embedder = Gated()
    embedder.release.set()
    async with Runtime.open(tmp_path, workers=0, embedder="none") as rt:
        semantic = await _filled(rt, embedder)
        memory = MemoryService(rt.memory.store, rt.memory.sessions, semantic)
        for query in ("the sofa", "cat", "tea"):
            hits = await memory.recall(query, k=4, mode="hybrid")
            words = await rt.memory.store.search(text.query_terms(query), DEPTH, None)
            near = await semantic.search(rt.memory.store, ("local", "default"), query, DEPTH, None)
            want = fuse(words, near, 4)
            assert [(h.memory_id, h.score, h.match) for h in hits] == [(f.item.id, f.score, how) for f, how in want]
    assert embedder.beside == [True, True, True]  # each hybrid recall's query (the searches after found it kept)


async def test_an_embedding_that_fails_before_it_begins_fails_the_search(tmp_path: Path) -> None:
    class Refusing(Gated):
        def start_query(
            self, text: str, started: Callable[[], None] | None = None, *, beside: bool = False
        ) -> Future[Any]:
            failed: Future[Any] = Future()
            failed.set_exception(RuntimeError("no query thread"))
            return failed

    async with Runtime.open(tmp_path, workers=0, embedder="none") as rt:
        semantic = await _filled(rt, Refusing())
        with pytest.raises(RuntimeError, match="no query thread"):
            await semantic.search(rt.memory.store, ("local", "default"), "sofa", 3, None)


def test_a_query_that_leaves_a_core_is_embedded_to_the_same_vector() -> None:
    """Modes share the kept query vectors (``QUERY_CACHE``): a query a hybrid recall embedded on one
    core less must be the vector a semantic recall would have made."""
    if not local_available():
        unavailable("the embeddings extra", "pip install -e '.[embeddings]'")
    embedder = LocalEmbedder()
    for query in ("what is my pet called", "w12 w845 w2210", "le chat dort sur le canapé", "猫はソファで寝る"):
        alone = embedder.start_query(query).result()
        assert np.array_equal(embedder.start_query(query, beside=True).result(), alone)
