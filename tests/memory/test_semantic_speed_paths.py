"""What keeps semantic recall fast, checked for what it must not change (issue 30).

- The scan rounds the query to int8 and scores every row with integer dot products, then scores
  its best rows again exactly: the ranking and the scores are those of the exact scan.
- The items read after ranking probes the primary keys on SQLite (with no statistics its planner
  preferred walking every item of the space by the (tenant, project) index: ~100 ms at 100k).
- Items are embedded on a thread of their own at the lowest CPU priority, never the event loop's.
- A query asked again is not embedded again (the latest ``QUERY_CACHE`` queries' vectors are kept).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime import Runtime
from runtime.memory.embed import _unit
from runtime.memory.semantic import BACKGROUND_NICE, QUERY_CACHE, Semantic
from runtime.memory.space_index import SpaceIndex, quantize
from runtime.memory.store import NewMemory
from runtime.store.core import vectors as vector_ops
from runtime.store.core.dialect import SQLITE
from runtime.store.sqlite.backend import sqlite_database
from runtime.store.sqlite.executor import drive

pytestmark = pytest.mark.anyio


def test_the_two_step_scan_ranks_and_scores_as_the_exact_scan() -> None:
    pytest.importorskip("simsimd")
    rng = np.random.default_rng(11)
    # Clustered vectors, as a model's are: many rows near each query, so near-ties are common.
    centers = rng.standard_normal((20, 64)).astype(np.float32)
    rows = _unit(centers[rng.integers(0, 20, 6000)] + 0.35 * rng.standard_normal((6000, 64)).astype(np.float32))
    packed = quantize(rows)
    index = SpaceIndex()
    index.add([(seq, "user" if seq % 3 else "agent", s, b) for seq, (s, b) in enumerate(packed, start=1)])
    exact = np.stack([np.frombuffer(b, dtype=np.int8).astype(np.float32) * s for s, b in packed])
    scopes = np.array(["user" if seq % 3 else "agent" for seq in range(1, 6001)])
    for q in range(30):
        query = _unit(centers[q % 20] + 0.35 * rng.standard_normal(64).astype(np.float32))
        for scope in (None, "agent"):
            scores = exact @ query
            if scope is not None:
                scores = np.where(scopes == scope, scores, -np.inf)
            want = np.argsort(-scores, kind="stable")[:20]
            got = index.top(query, 20, scope)
            assert [seq for seq, _ in got] == [int(i) + 1 for i in want]  # 20 of 6000: the pool is 224
            assert [score for _, score in got] == pytest.approx([float(scores[i]) for i in want], abs=1e-5)


async def test_the_items_of_a_ranking_are_read_by_primary_key(tmp_path: Path) -> None:
    async with Runtime.open(tmp_path, workers=0) as rt:
        await rt.memory.store.put([NewMemory(f"memory://user/{i}", "user", f"fact {i}") for i in range(50)])

        def plan(conn: sqlite3.Connection) -> str:
            ran: list[str] = []
            conn.set_trace_callback(ran.append)
            try:
                drive(conn, vector_ops.items(SQLITE, "local", "default", "m", [3, 5, 8]))
            finally:
                conn.set_trace_callback(None)
            return " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + ran[0]))

        found = await sqlite_database(rt.store).read(plan)
    assert found.count("INTEGER PRIMARY KEY") == 2 and "memory_items_scope_id" not in found, found


class Recording:
    """An embedder (the ``Embedder`` protocol) that notes the thread each batch is embedded on."""

    model = "recording"

    def __init__(self) -> None:
        self.threads: list[tuple[int, int]] = []
        self.queries: list[str] = []

    def passages(self, texts: Sequence[str]) -> Any:
        tid = threading.get_native_id()
        self.threads.append((tid, os.getpriority(os.PRIO_PROCESS, tid)))
        return _unit(np.ones((len(texts), 8), dtype=np.float32))

    def query(self, text: str) -> Any:
        self.queries.append(text)
        return _unit(np.ones(8, dtype=np.float32))


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own nice value is Linux's")
async def test_items_are_embedded_at_the_lowest_priority_off_the_event_loop(tmp_path: Path) -> None:
    async with Runtime.open(tmp_path, workers=0) as rt:
        await rt.memory.store.put([NewMemory(f"memory://user/{i}", "user", f"fact {i}") for i in range(40)])
        embedder = Recording()
        assert await Semantic(embedder).embed_pending(rt.memory.store.vectors()) == 40
    loop = threading.get_native_id()
    assert len(embedder.threads) == 3 and len({tid for tid, _ in embedder.threads}) == 1  # batches of 16
    assert all(tid != loop and nice == BACKGROUND_NICE for tid, nice in embedder.threads)


async def test_a_query_asked_again_is_not_embedded_again(tmp_path: Path) -> None:
    async with Runtime.open(tmp_path, workers=0) as rt:
        store = rt.memory.store
        await store.put([NewMemory(f"memory://user/{i}", "user", f"fact {i}") for i in range(3)])
        embedder = Recording()
        semantic = Semantic(embedder)
        await semantic.embed_pending(store.vectors())
        first = await semantic.search(store, ("local", "default"), "my pet", 3, None)
        again = await semantic.search(store, ("local", "default"), "my pet", 3, None)
        assert len(first) == 3 and [f.item.id for f in again] == [f.item.id for f in first]
        assert embedder.queries == ["my pet"]
        for i in range(QUERY_CACHE):  # the oldest query leaves the cache
            await semantic.search(store, ("local", "default"), f"query {i}", 1, None)
        await semantic.search(store, ("local", "default"), "my pet", 1, None)
        assert embedder.queries.count("my pet") == 2 and len(embedder.queries) == QUERY_CACHE + 2
