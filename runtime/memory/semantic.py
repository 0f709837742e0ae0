"""Semantic recall: this process's vector index of each memory space, and the task that embeds items.

The vectors live in the store (``runtime.store.core.vectors``: int8 and a scale per item, the
model's id beside each), so every process on a store finds the same items. Each process keeps the
vectors of the spaces it searches in memory as one float32 matrix per space, and before each search
reads the rows stamped since its last look (one indexed range read, empty when nothing changed):
an item another process embedded is found by the next search after that process commits it.
Hits are checked against the items table when read (``embedded``), so a vector of an item since
deleted, superseded or rewritten is never returned.

``Embedding.run`` is a task of the runtime's task group: woken by every write (and once at start),
it embeds what is not embedded yet by the current model, a batch at a time on a worker thread, and
stores the vectors; ``memory_remember`` only wakes it. The scan is a cosine (dot product of unit
vectors) over the space's matrix: ~10 ms at 100k items of 384 dimensions on one core.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from runtime.memory import text
from runtime.memory.embed import Embedder, numpy
from runtime.memory.store import Found

if TYPE_CHECKING:
    from runtime.memory.embed import Vectors
    from runtime.memory.store import MemoryStore, VectorStore

log = logging.getLogger(__name__)

BATCH = 16
"""Items embedded at once: large enough to amortize a call, small enough that a store write follows soon."""
RRF_K = 60
"""Reciprocal rank fusion's constant (Cormack et al. 2009): a hit's fused score is the sum over the
rankings it is in of ``1 / (RRF_K + rank)``."""
RETRY_S = 5.0


def quantize(vectors: Vectors) -> list[tuple[float, bytes]]:
    """Each unit vector as (scale, int8 bytes): ``vector ≈ int8 * scale``, one byte per dimension."""
    np = numpy()

    peak = np.maximum(np.abs(vectors).max(axis=1), 1e-12)
    q = np.rint(vectors / peak[:, None] * 127).astype(np.int8)
    return [(float(p / 127), row.tobytes()) for p, row in zip(peak, q, strict=True)]


@dataclass
class SpaceIndex:
    """One space's vectors of one model in memory: rows of a matrix, by item ``seq``."""

    dim: int = 0
    horizon: int = 0
    rows: dict[int, int] = field(default_factory=dict)  # seq -> row
    seqs: Any = None  # int64[capacity]
    scopes: list[str] = field(default_factory=list)
    matrix: Any = None  # float32[capacity, dim]
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    def add(self, found: Sequence[tuple[Any, ...]]) -> None:
        np = numpy()

        for seq, scope, scale, vec in found:
            v = np.frombuffer(bytes(vec), dtype=np.int8).astype(np.float32) * float(scale)
            if self.matrix is None:
                self.dim = v.shape[0]
                self.matrix = np.zeros((64, self.dim), dtype=np.float32)
                self.seqs = np.zeros(64, dtype=np.int64)
            if v.shape[0] != self.dim:
                continue  # a vector of another shape under the same model id: not comparable
            at = self.rows.get(int(seq))
            if at is None:
                at = self.rows[int(seq)] = len(self.scopes)
                self.scopes.append(scope)
                if at == len(self.seqs):  # grow by doubling: appends stay amortized O(1)
                    self.matrix = np.concatenate([self.matrix, np.zeros_like(self.matrix)])
                    self.seqs = np.concatenate([self.seqs, np.zeros_like(self.seqs)])
                self.seqs[at] = int(seq)
            self.matrix[at] = v

    def top(self, query: Vectors, n: int, scope: str | None) -> list[tuple[int, float]]:
        """The ``n`` best ``(seq, cosine)``, best first (of ``scope`` only when it is given)."""
        np = numpy()

        size = len(self.scopes)
        if not size or query.shape[0] != self.dim:
            return []
        scores = self.matrix[:size] @ query
        if scope is not None:
            scores = np.where(np.asarray(self.scopes) == scope, scores, -np.inf)
        n = min(n, size)
        best = np.argpartition(-scores, n - 1)[:n]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(int(self.seqs[i]), float(scores[i])) for i in best if np.isfinite(scores[i])]


class Semantic:
    """The embedder and this process's vector indexes, shared by every scope of a runtime."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._indexes: dict[tuple[str, str], SpaceIndex] = {}
        self._wake = anyio.Event()
        self._idle = anyio.Event()

    @property
    def model(self) -> str:
        return self.embedder.model

    def wake(self) -> None:
        """Items were written: the embedding task looks for what to embed."""
        self._wake.set()
        self._idle = anyio.Event() if self._idle.is_set() else self._idle

    async def settled(self) -> None:
        """Return once the embedding task has found nothing left to embed since the last ``wake``."""
        await self._idle.wait()

    async def run(self, vectors: VectorStore) -> None:
        """The embedding task: embed what is pending, then wait to be woken; never returns."""
        delay = RETRY_S
        while True:
            self._wake = anyio.Event()
            try:
                await self.embed_pending(vectors)
                delay = RETRY_S
            except Exception as exc:  # an unreachable endpoint, a store failing over: try again later
                log.warning("embedding memory items failed (%s); retrying in %.0f s", exc, delay)
                with anyio.move_on_after(delay):
                    await self._wake.wait()
                delay = min(delay * 2, 300.0)
                continue
            if not self._wake.is_set():
                self._idle.set()
            await self._wake.wait()

    async def embed_pending(self, vectors: VectorStore) -> int:
        """Embed every item not embedded by the current model; returns how many were stored."""
        after, stored = 0, 0
        while batch := await vectors.pending(self.model, after, BATCH):
            bodies = [text.body(r["content"], _tags(r["tags"])) for r in batch]
            made = await anyio.to_thread.run_sync(self.embedder.passages, bodies)
            packed = quantize(made)
            stored += await vectors.save(
                self.model,
                [(int(r["seq"]), r["digest"] or "", s, b) for r, (s, b) in zip(batch, packed, strict=True)],
            )
            after = int(batch[-1]["seq"])
        return stored

    async def search(
        self, store: MemoryStore, key: tuple[str, str], query: str, n: int, scope: str | None
    ) -> list[Found]:
        """The ``n`` items nearest ``query`` (cosine > 0), best first."""
        qv = await anyio.to_thread.run_sync(self.embedder.query, query)
        index = self._indexes.setdefault(key, SpaceIndex())
        async with index.lock:  # one refresh at a time; a search waits for it, then reads the same matrix
            horizon, found = await store.vectors_since(self.model, index.horizon)
            index.add(found)
            index.horizon = horizon
            best = index.top(qv, n + n // 2 + 8, scope)  # some may be stale: ask for more
        items = await store.embedded(self.model, [seq for seq, _ in best])
        hits = [Found(items[seq], score) for seq, score in best if seq in items and score > 0]
        return hits[:n]


def _tags(raw: str) -> tuple[str, ...]:
    import json

    return tuple(json.loads(raw))


def fuse(keyword: list[Found], semantic: list[Found], k: int) -> list[tuple[Found, str]]:
    """Reciprocal rank fusion of two rankings: the ``k`` best, each with what matched it."""
    scores: dict[str, float] = {}
    first: dict[str, Found] = {}
    where: dict[str, set[str]] = {}
    for name, ranking in (("keyword", keyword), ("semantic", semantic)):
        for rank, found in enumerate(ranking, 1):
            key = found.item.id
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank)
            first.setdefault(key, found)
            where.setdefault(key, set()).add(name)
    order = sorted(scores, key=lambda key: -scores[key])[:k]
    return [
        (Found(first[key].item, scores[key]), "both" if len(where[key]) == 2 else next(iter(where[key])))
        for key in order
    ]
