"""Semantic recall: this process's vector index of each memory space, and the task that embeds items.

The vectors live in the store (``runtime.store.core.vectors``: int8 and a scale per item, the
model's id beside each), so every process on a store finds the same items. Each process keeps the
vectors of the spaces it searches in memory as one int8 matrix per space (the store's bytes), and
before each search reads the rows stamped since its last look (one indexed range read, empty when
nothing changed), while the query is embedded: an item another process embedded is found by the
next search after that process commits it. Hits are checked against the items table when read
(``embedded``), so a vector of an item since deleted, superseded or rewritten is never returned.

``Semantic.run`` is a task of the runtime's task group: woken by every write (and once at start),
it embeds what is not embedded yet by the current model, a batch at a time on a thread of its own
at low priority, and stores the vectors; ``memory_remember`` only wakes it. The scan
(``runtime.memory.space_index``) is an integer dot product over the matrix, then an exact cosine of the best.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from runtime.memory import text
from runtime.memory.embed import Embedder
from runtime.memory.model import MemoryItem
from runtime.memory.space_index import SpaceIndex, quantize
from runtime.memory.store import Found

if TYPE_CHECKING:
    from runtime.memory.embed import Vectors
    from runtime.memory.store import MemoryStore, VectorStore

log = logging.getLogger(__name__)
T = TypeVar("T")

BATCH = 16
"""Items embedded at once: large enough to amortize a call, small enough that a store write follows soon."""
ALPHA = 0.7
"""The weight of the meaning in a hybrid score (the words get ``1 - ALPHA``). Measured on
``bench/recall_quality.py``: this convex combination of normalized scores beat reciprocal rank
fusion (k = 60) on every group of questions (recall@5 0.904 against 0.791 over all, 0.761 against
0.500 on questions sharing no word, 1.0 against 0.986 on those sharing one); 0.6 to 0.8 were alike,
0.5 worse (``docs/memory.md``)."""
RETRY_S = 5.0
BACKGROUND_NICE = 19
"""The nice value of the thread that embeds items: a write's and a query's threads go first when the
CPU is busy, and it has any idle core to itself. Measured on a loaded machine (load average 9 on 2
cores, ``bench.memory_semantic``): ``memory_remember``'s median with an embedder was 2.3x that with
none at the same priority, 1.3x at this one, 1.1x with ``GATHER_S`` too."""
GATHER_S = 0.2
"""How long the task waits after a write before embedding: the items of writes in that time are
embedded as one batch and their vectors stored in one commit (a commit for each remembered item
beside the item's own took 1.3x off ``memory_remember``'s median)."""
QUERY_CACHE = 256
"""Queries whose vectors are kept (least recently used out): an agent asks the same recall again (the
user's preferences, at each session's start), and a query's embedding is most of a recall's time."""
FULL_PASS_S = 300.0
"""How often the embedding task also looks at every item (those written by processes without an embedder)."""


@dataclass(frozen=True)
class Near:
    """A search's hit: the item's ``seq`` and id, its cosine (> 0), and the item when it was read whole."""

    seq: int
    id: str
    score: float
    item: MemoryItem | None = None


class Semantic:
    """The embedder and this process's vector indexes, shared by every scope of a runtime."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._indexes: dict[tuple[str, str], SpaceIndex] = {}
        self._wake = anyio.Event()
        self._idle = anyio.Event()
        self._written: set[str] = set()  # ids written since the task last looked
        self._full = True  # whether the next pass looks at every item
        self._pool: ThreadPoolExecutor | None = None
        self._queries: OrderedDict[str, Vectors] = OrderedDict()  # the latest queries' vectors

    def _background(self) -> ThreadPoolExecutor:
        """The thread that embeds items: one, at the lowest CPU priority (``BACKGROUND_NICE``)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="rath-embed", initializer=_lower_priority)
        return self._pool

    @property
    def model(self) -> str:
        return self.embedder.model

    def wake(self, ids: Sequence[str] | None = None) -> None:
        """Items were written (these ``ids``; None: unknown, look at every item): the task embeds them."""
        if ids is None:
            self._full = True
        else:
            self._written.update(ids)
        self._wake.set()
        self._idle = anyio.Event() if self._idle.is_set() else self._idle

    async def settled(self) -> None:
        """Return once the embedding task has found nothing left to embed since the last ``wake``."""
        await self._idle.wait()

    async def run(self, vectors: VectorStore) -> None:
        """The embedding task; never returns. At start, and every ``FULL_PASS_S`` (items another
        process wrote without an embedder), it looks at every item (one anti-join over the items:
        ~40 ms at 100k); woken by a write of this process, only at the items written."""
        delay = RETRY_S
        self._full = True
        while True:
            if self._written and not self._full:
                await anyio.sleep(GATHER_S)  # let a stream of writes make one batch, and one commit of vectors
            self._wake = anyio.Event()
            full, self._full = self._full, False
            ids, self._written = list(self._written), set()
            try:
                await self.embed_pending(vectors, None if full else ids)
                delay = RETRY_S
            except Exception as exc:  # an unreachable endpoint, a store failing over: try again later
                log.warning("embedding memory items failed (%s); retrying in %.0f s", exc, delay)
                self._full = True
                with anyio.move_on_after(delay):
                    await self._wake.wait()
                delay = min(delay * 2, 300.0)
                continue
            if not self._wake.is_set():
                self._idle.set()
            with anyio.move_on_after(FULL_PASS_S) as waited:
                await self._wake.wait()
            self._full = self._full or waited.cancelled_caught

    async def embed_pending(self, vectors: VectorStore, ids: Sequence[str] | None = None) -> int:
        """Embed every item (or those of ``ids``) not embedded by the current model; returns how
        many were stored."""
        after, stored = 0, 0
        todo = None if ids is None else list(ids)
        while True:
            if todo is None:  # every item, in seq order
                batch = await vectors.pending(self.model, after, BATCH)
                if not batch:
                    return stored
            elif not todo:
                return stored
            else:  # the items written: most need a vector, since they were just written
                batch, todo = await vectors.pending_of(self.model, todo[:BATCH]), todo[BATCH:]
                if not batch:
                    continue
            made = await anyio.to_thread.run_sync(self._background().submit(_embed_rows, self.embedder, batch).result)
            packed = quantize(made)
            stored += await vectors.save(
                self.model,
                [(int(r["seq"]), r["digest"] or "", s, b) for r, (s, b) in zip(batch, packed, strict=True)],
            )
            after = int(batch[-1]["seq"])

    async def search(
        self, store: MemoryStore, key: tuple[str, str], query: str, n: int, scope: str | None
    ) -> list[Found]:
        """The ``n`` items nearest ``query`` (cosine > 0), best first."""
        near = await self._search(store, key, query, n, scope, None, n)
        hits: list[Found] = []
        # The best n candidates were read whole with the check; when some were stale, the next are read
        # now (one rewritten or deleted since gives way to the next, as if it had been so when found).
        while near and len(hits) < n:
            take, near = near[: n - len(hits)], near[n - len(hits) :]
            hits += await self.read(store, take)
        return hits

    async def read(self, store: MemoryStore, near: Sequence[Near]) -> list[Found]:
        """The items of ``near`` with their scores, in order, but for those rewritten, superseded or
        deleted since they were found: those not read whole yet are read now (``store.embedded``,
        which checks them again)."""
        unread = [x.seq for x in near if x.item is None]
        items = await store.embedded(self.model, unread) if unread else {}
        return [
            Found(x.item if x.item is not None else items[x.seq], x.score)
            for x in near
            if x.item is not None or x.seq in items
        ]

    async def fused(self, store: MemoryStore, words: list[Found], near: list[Near], k: int) -> list[tuple[Found, str]]:
        """``rank`` (``fuse``) of the keyword search's hits and the nearest items: the content of the fused ``k``
        that the keyword search did not read is read now (and only theirs)."""
        known = {x.id: x.item for x in near if x.item is not None}
        known.update((f.item.id, f.item) for f in words)  # as ``fuse``: the keyword search's item first
        while True:
            order = rank([(f.item.id, f.score) for f in words], [(x.id, x.score) for x in near], k)
            chosen = {key for key, _, _ in order}
            need = [x for x in near if x.id in chosen and x.id not in known]
            if need:
                known.update((f.item.id, f.item) for f in await self.read(store, need))
            if gone := {x.id for x in need if x.id not in known}:  # changed since found: fuse without them
                near = [x for x in near if x.id not in gone]
                continue
            return [(Found(known[key], score), how) for key, score, how in order]

    async def search_beside(
        self,
        store: MemoryStore,
        key: tuple[str, str],
        query: str,
        n: int,
        scope: str | None,
        beside: Callable[[], Awaitable[T]] | None,
        whole: int | None = None,
    ) -> tuple[list[Near], T | None]:
        """The ``n`` items nearest ``query`` (cosine > 0), best first, and what ``beside()`` returned:
        other work of the recall (hybrid's keyword search), done while the query is embedded. Only the
        best ``whole`` (default ``n``) are read whole: the rest are only checked (``store.current``),
        and ``fused`` or ``read`` reads any more it returns. For a fusion of ``k``, ``whole = k`` is
        enough but for stale items: an item only this search found and ranked below ``k`` others of
        it is below them in the fusion too.

        The query's embedding goes first, to its thread straight from here (the local model is told
        that work runs beside it, and leaves that work a core). ``beside`` starts only once that
        thread is in the engine, which holds no GIL: started together, the reader thread's Python
        held the GIL the embedding thread needed to get going, and a hybrid recall's embedding began
        after the keyword search had ended, ~3.5 ms in (100k items). The index reads what was
        stamped since its last look meanwhile too. The scan runs on a worker thread: the event loop
        only waits."""
        besides: list[T] = []
        near = await self._search(store, key, query, n, scope, beside, n if whole is None else whole, besides)
        return near[:n], besides[0] if besides else None

    async def _search(
        self,
        store: MemoryStore,
        key: tuple[str, str],
        query: str,
        n: int,
        scope: str | None,
        beside: Callable[[], Awaitable[T]] | None,
        whole: int,
        besides: list[T] | None = None,
    ) -> list[Near]:
        """``search_beside``'s work: every candidate still valid, best first (``n`` and more)."""
        index = self._indexes.setdefault(key, SpaceIndex())
        vector, made, begun = self._queries.get(query), None, None
        if vector is not None:
            self._queries.move_to_end(query)
        else:
            made, begun = self._embed_query(query, beside is not None)

        async def run_beside() -> None:
            assert beside is not None and besides is not None
            besides.append(await beside())

        failed: list[Exception] = []
        try:
            async with anyio.create_task_group() as tg:
                if beside is not None:
                    # A worker thread waits for it (the embedding thread needs no GIL to say so). The
                    # refresh alone is a short read: waiting for it measured no faster (+0.2 ms p50, load 7).
                    if begun is not None:
                        await anyio.to_thread.run_sync(begun.wait, abandon_on_cancel=True)
                    tg.start_soon(run_beside)
                try:  # the search goes on while ``beside`` runs: neither waits for the other
                    hits = await self._nearest(store, index, query, vector, made, n, scope, whole)
                except Exception as exc:  # an embedder's own error, as it is (not in a group)
                    failed.append(exc)
                    tg.cancel_scope.cancel()
        except BaseException:
            if made is not None:
                made.cancel()  # nobody will wait for it (nor hear how it failed)
            raise
        if failed:
            if made is not None:
                made.cancel()  # a refresh that failed: the vector is not waited for
            raise failed[0]
        return hits

    async def _nearest(
        self,
        store: MemoryStore,
        index: SpaceIndex,
        query: str,
        vector: Vectors | None,
        made: asyncio.Future[Vectors] | None,
        n: int,
        scope: str | None,
        whole: int,
    ) -> list[Near]:
        """``search``'s own part, from the index's refresh (while the query is embedded) to the valid
        candidates (no content read)."""
        async with index.lock:  # one refresh at a time; a search waits for it, then reads the same matrix
            horizon, found = await store.vectors_since(self.model, index.horizon)
            index.add(found)
            index.horizon = horizon
        if made is not None:
            vector = await made
            self._queries[query] = vector
            if len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        async with index.lock:  # no refresh moves the rows while they are scanned
            seen = index.horizon
            best = await anyio.to_thread.run_sync(index.top, vector, n + n // 2 + 8, scope)  # some may be stale
        ids, items = await store.current(
            self.model, [seq for seq, _ in best], [seq for seq, score in best if score > 0][:whole]
        )
        if stale := [seq for seq, _ in best if seq not in ids]:
            async with index.lock:  # deleted, superseded or rewritten since embedded: out of the next scans
                if index.horizon == seen:  # unless a search since read newer vectors (maybe theirs)
                    index.forget(stale)
        return [Near(seq, ids[seq], score, items.get(seq)) for seq, score in best if seq in ids and score > 0]

    def _embed_query(self, query: str, beside: bool) -> tuple[asyncio.Future[Vectors], threading.Event | None]:
        """The query's vector, begun now, and an event set once the embedder is at work (or done;
        None: no need to wait for it).

        The local model's thread is handed the query straight from here, and sets the event just
        before its engine runs: setting a ``threading.Event`` lets go of no GIL, so nothing can take
        the GIL from that thread before the engine lets go of it (waking the event loop from there
        would: a socket's send lets it go, and a reader thread's Python took it for milliseconds)."""
        start = getattr(self.embedder, "start_query", None)
        if start is None:  # an endpoint waits on the network, holding no GIL: the rest need not wait for it
            return asyncio.ensure_future(anyio.to_thread.run_sync(self.embedder.query, query)), None
        begun = threading.Event()
        future = start(query, begun.set, beside=beside)  # beside: work of ours runs meanwhile, leave it a core
        future.add_done_callback(lambda _: begun.set())  # failed or cancelled before it began: no waiting forever
        return asyncio.wrap_future(future), begun


def _lower_priority() -> None:
    """Give the calling thread the lowest CPU priority (on Linux a thread's nice value is its own)."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)


def _embed_rows(embedder: Embedder, rows: Sequence[Any]) -> Vectors:
    """The vectors of items' rows, made on the background thread with their text's terms: tokenizing a
    batch of 200,000-character items is ~20 ms of CPU, which on the event loop held up every request."""
    return embedder.passages([text.body(r["content"], _tags(r["tags"])) for r in rows])


def _tags(raw: str) -> tuple[str, ...]:
    import json

    return tuple(json.loads(raw))


def fuse(keyword: list[Found], semantic: list[Found], k: int, alpha: float = ALPHA) -> list[tuple[Found, str]]:
    """``rank`` of two lists of found items: the ``k`` best, each with its fused score and what matched it."""
    first: dict[str, Found] = {}
    for found in (*keyword, *semantic):
        first.setdefault(found.item.id, found)
    ranked = rank([(f.item.id, f.score) for f in keyword], [(f.item.id, f.score) for f in semantic], k, alpha)
    return [(Found(first[key].item, score), how) for key, score, how in ranked]


def rank(
    keyword: list[tuple[str, float]], semantic: list[tuple[str, float]], k: int, alpha: float = ALPHA
) -> list[tuple[str, float, str]]:
    """A convex combination of the two rankings' normalized scores (each ``(item id, score)``): the
    ``k`` best ``(id, score, what matched it)`` (score > 0). BM25 is divided by the best BM25 of the
    list, a cosine mapped onto 0..1 between the list's worst and best; an item missing from a list
    gets 0 from it."""
    best_bm25 = max((score for _, score in keyword), default=1.0) or 1.0
    cosines = [score for _, score in semantic]
    low, high = (min(cosines), max(cosines)) if cosines else (0.0, 1.0)
    scores: dict[str, float] = {}
    where: dict[str, set[str]] = {}
    for name, ranking, weight in (("keyword", keyword, 1 - alpha), ("semantic", semantic, alpha)):
        for key, score in ranking:
            part = score / best_bm25 if name == "keyword" else (score - low) / ((high - low) or 1.0)
            scores[key] = scores.get(key, 0.0) + weight * part
            where.setdefault(key, set()).add(name)
    order = [key for key in sorted(scores, key=lambda key: -scores[key]) if scores[key] > 0][:k]
    return [(key, scores[key], "both" if len(where[key]) == 2 else next(iter(where[key]))) for key in order]
