"""What the memory service needs from a store: the ``MemoryStore`` protocol and the records it speaks.

Implemented once, ``runtime.store.core.memory``, over each backend's keyword index (``recall.py``:
FTS5 on SQLite, postings tables on PostgreSQL). Each method is one whole unit of work (one
transaction): ``put`` writes all its items or none, a read is one consistent snapshot. ``search``
ranks by BM25 within this tenant/project alone (scores > 0, higher is better, best first), exactly
as follows.

Scores are Okapi BM25 with Lucene's IDF, which stays positive however common a term is, so a
score means the same at any store size (FTS5's own ``bm25()`` clamps the IDF of a term found in
half of the items or more to 1e-6, so in a small store every score was ~1e-6). For a query of
distinct terms ``t`` and an item ``d`` of the item's memory space (its tenant/project)::

    score(d) = sum over t in d of  idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
    idf(t)   = ln(1 + (N - df + 0.5) / (df + 0.5))
    k1 = 1.2, b = 0.75

``tf``: occurrences of ``t`` in ``d``; ``dl``: terms in ``d``; ``avgdl``: terms in the space / ``N``;
``N``: items in the space's index (superseded items are not); ``df``: those items containing ``t``
(terms are ``runtime.memory.text.tokenize`` of content plus tags). Every hit scores > 0; an item
sharing no term is never a hit; ties go to the older item. Any backend computes exactly this from
``tf, dl, N, df, avgdl`` (a PostgreSQL one from a postings table in plain SQL).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.memory.model import MemoryItem

SUPERSEDED = "superseded"
"""The tag of an item a newer one replaced: still readable and listed, no longer recalled."""


@dataclass(frozen=True)
class NewMemory:
    """What a write of one item needs; an item already at ``uri`` is replaced (its id kept)."""

    uri: str
    scope: str
    content: str
    tags: tuple[str, ...] = ()
    source: str | None = None
    id: str | None = None  # the id a new item gets (when its URI embeds it); an item replaced keeps its own
    once_per_scope: bool = False  # if the scope already holds this exact content, keep that item instead


@dataclass(frozen=True)
class Found:
    """A search result before snippets: the item and its score (> 0, higher is better)."""

    item: MemoryItem
    score: float


class VectorStore(Protocol):
    """Every space's vectors (unscoped: one embedding task serves every tenant/project)."""

    async def pending(self, model: str, after: int, limit: int) -> list[Any]:
        """Rows (``seq``, ``digest``, ``content``, ``tags``) of items after ``after`` not embedded by ``model``."""
        ...

    async def pending_of(self, model: str, ids: Sequence[str]) -> list[Any]:
        """As ``pending``, of the items ``ids`` only (what a write just stored)."""
        ...

    async def save(self, model: str, made: Sequence[tuple[int, str, float, bytes]]) -> int:
        """Store vectors (``seq``, digest embedded, scale, int8 bytes) of items still holding that content."""
        ...

    async def count(self, model: str) -> tuple[int, int]:
        """Live items, and those embedded by ``model``."""
        ...


class MemoryStore(Protocol):
    """What the memory service needs from a store. Every call is scoped to one tenant/project."""

    async def put(self, items: list[NewMemory], supersede: Sequence[str] = ()) -> list[MemoryItem]: ...
    async def search(self, terms: list[str], k: int, scope: str | None) -> list[Found]: ...
    async def get(self, memory_id: str) -> MemoryItem | None: ...
    async def at(self, uri: str) -> MemoryItem | None: ...
    async def scan(self, prefix: str, limit: int, after: str | None = None) -> list[MemoryItem]: ...
    async def ids(self, prefix: str, limit: int) -> list[str]: ...
    async def tree(self, prefix: str, after: str | None, limit: int) -> list[tuple[str, MemoryItem | int, str]]: ...
    async def delete(
        self, *, memory_id: str | None = None, uri: str | None = None, prefix: str | None = None
    ) -> int: ...
    # Semantic recall (``runtime.memory.semantic``; the vectors are ``runtime.store.core.vectors``'):
    async def vectors_since(self, model: str, horizon: int) -> tuple[int, list[tuple[Any, ...]]]: ...
    async def embedded(self, model: str, seqs: Sequence[int]) -> dict[int, MemoryItem]: ...
    async def current(
        self, model: str, seqs: Sequence[int], whole: Sequence[int] = ()
    ) -> tuple[dict[int, str], dict[int, MemoryItem]]: ...
    def vectors(self) -> VectorStore: ...


def content_digest(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()[:32]


def idf(n: int, df: int) -> float:
    """Lucene's BM25 IDF: positive for every term present (``df >= 1``) in a space of ``n`` items."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))
