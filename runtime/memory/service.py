"""The memory service, reached as ``runtime.memory``: remember, recall, read, list, forget, commit.

It validates input (saying what was wrong and how to fix it), turns queries into terms, cuts
snippets and builds commits; persistence and ranking are the ``MemoryStore``'s. Every call is
scoped to the runtime's tenant and project: nothing here can see another tenant's items.
"""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import Sequence

import anyio
import anyio.to_thread

from runtime.errors import InvalidInputError, NotFoundError
from runtime.ids import check_id_search, is_id, new_id
from runtime.memory import text
from runtime.memory.extract import Extractor, HeuristicExtractor, transcript, transcript_body
from runtime.memory.model import (
    PREFIX,
    CommitResult,
    MemoryHit,
    MemoryItem,
    check_content,
    check_path,
    check_prefix,
    check_scope,
    check_tags,
    make_uri,
    parse_uri,
)
from runtime.memory.semantic import Semantic
from runtime.memory.store import SUPERSEDED, Found, MemoryStore, NewMemory
from runtime.sessions.service import SessionService
from runtime.telemetry import Attributes, Tracing

MAX_K = 100
MODES = ("keyword", "semantic", "hybrid")
DEPTH = 50
"""How deep each ranking is read for a hybrid recall: fusion finds an item ranked well by either."""
MAX_QUERY_TERMS = 128  # a pasted document as a query: its first 128 distinct terms are plenty, and cheap
#: Characters of content one recall scans for its snippets, shared among its hits (each gets at least
#: SNIPPET_MIN_SCAN): a snippet is cut on the event loop, and k long items must not hold it up.
SNIPPET_SCAN = 100_000
SNIPPET_MIN_SCAN = 1_000
INLINE_SNIPPET_SCAN = 10_000  # about a millisecond of scanning: more goes to a worker thread
MAX_LIST = 1000
MAX_SOURCE_CHARS = 200
SUPERSEDE_DEPTH = 20  # how far up the lineage commit looks for earlier transcripts of a conversation


def _check_source(source: str | None) -> str | None:
    if source is not None and (not isinstance(source, str) or not source or len(source) > MAX_SOURCE_CHARS):
        raise InvalidInputError(f"source must be a session or run id (1 to {MAX_SOURCE_CHARS} characters) or omitted")
    return source


def _check_memory_id(memory_id: str) -> str:
    if not isinstance(memory_id, str) or not is_id(memory_id, "mem"):
        raise InvalidInputError(f"{memory_id!r} is not a memory id; ids look like 'mem_' and 24 hex digits")
    return memory_id


class MemoryService:
    """Persistent memory of one tenant/project, shared by every agent and process on the same store."""

    def __init__(
        self,
        store: MemoryStore,
        sessions: SessionService,
        semantic: Semantic | None = None,
        scope: tuple[str, str] = ("local", "default"),
        tracing: Tracing | None = None,
    ) -> None:
        self.store = store
        self.sessions = sessions
        self.semantic = semantic  # None: no embedder, keyword recall only
        self._key = scope
        self.tracing = tracing or Tracing()  # each recall a span ``memory recall`` (runtime.telemetry)

    def _written(self, items: builtins.list[MemoryItem]) -> None:
        if self.semantic is not None:
            self.semantic.wake([i.id for i in items])

    async def remember(
        self,
        content: str,
        *,
        scope: str = "user",
        path: str | None = None,
        tags: Sequence[str] = (),
        source: str | None = None,
    ) -> MemoryItem:
        """Store ``content`` at ``memory://{scope}/{path}`` (path defaults to the new id); searchable at once.

        Remembering at a URI that already holds an item replaces that item and keeps its id.
        """
        memory_id = new_id("mem") if path is None else None
        new = NewMemory(
            uri=make_uri(scope, path or memory_id or ""),
            scope=scope,
            content=check_content(content),
            tags=check_tags(tags),
            source=_check_source(source),
            id=memory_id,
        )
        stored = (await self.store.put([new]))[0]
        self._written([stored])
        return stored

    async def recall(
        self, query: str, *, k: int = 5, scope: str | None = None, mode: str | None = None
    ) -> builtins.list[MemoryHit]:
        """What ``_recall`` finds, in a span ``memory recall`` (its mode, k, scope and how many hits; the
        query itself only when message contents may be captured)."""
        default = "keyword" if self.semantic is None else "hybrid"
        attributes: Attributes = {"rath.memory.mode": mode or default, "rath.memory.k": k, "rath.memory.scope": scope}
        with self.tracing.span("memory recall", attributes=attributes) as span:
            if self.tracing.capture_content:
                span.set("rath.memory.query", query)
            hits = await self._recall(query, k=k, scope=scope, mode=mode)
            span.set("rath.memory.hits", len(hits))
            return hits

    async def _recall(
        self, query: str, *, k: int = 5, scope: str | None = None, mode: str | None = None
    ) -> builtins.list[MemoryHit]:
        """The ``k`` items that best match ``query``, best first, each with a score > 0.

        ``mode`` (default ``hybrid`` with an embedder, else ``keyword``): ``keyword`` ranks by BM25
        and returns only items sharing at least one term with the query (a query with no searchable
        words has no hits; a very long one counts its first ``MAX_QUERY_TERMS`` distinct terms);
        ``semantic`` ranks by the cosine of the embeddings (items not embedded yet are not found);
        ``hybrid`` fuses the two rankings' normalized scores (``semantic.fuse``). A snippet of
        a very long item is found in its first ``SNIPPET_SCAN`` characters divided among the hits.
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("recall needs a non-empty query: the words to look for")
        if not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise InvalidInputError(f"k must be a whole number from 1 to {MAX_K} (got {k!r})")
        if scope is not None:
            check_scope(scope)
        mode = mode or ("keyword" if self.semantic is None else "hybrid")
        if mode not in MODES:
            raise InvalidInputError(f"mode must be one of {', '.join(MODES)} (got {mode!r})")
        if mode != "keyword" and self.semantic is None:
            raise InvalidInputError(
                f"{mode} recall needs an embedder: serve with --embedder local or openai, or use mode=keyword"
            )
        terms = text.query_terms(query)[:MAX_QUERY_TERMS]
        matched: builtins.list[tuple[Found, str]]
        if mode == "keyword":
            matched = [(f, "keyword") for f in await self.store.search(terms, k, scope)]
        else:
            semantic = self.semantic
            assert semantic is not None
            if mode == "semantic":
                near = await semantic.search(self.store, self._key, query, k, scope)  # DEPTH is for fusion
                matched = [(f, "semantic") for f in near]
            else:  # the two rankings at once: BM25 runs while the query is embedded
                depth = max(k, DEPTH)
                nearest, words = await semantic.search_beside(
                    self.store, self._key, query, depth, scope, lambda: self.store.search(terms, depth, scope), whole=k
                )
                matched = await semantic.fused(self.store, words or [], nearest, k)
        found = [f for f, _ in matched]
        scan = max(SNIPPET_MIN_SCAN, SNIPPET_SCAN // max(1, len(found)))

        def snippets() -> builtins.list[str]:
            return [text.snippet(f.item.content, terms, scan=scan) for f in found]

        # Cutting snippets is CPU work on the text scanned: a little is done here, more on a worker thread.
        scanned = sum(min(scan, len(f.item.content)) for f in found)
        cut = snippets() if scanned <= INLINE_SNIPPET_SCAN else await anyio.to_thread.run_sync(snippets)
        return [
            MemoryHit(
                memory_id=f.item.id,
                uri=f.item.uri,
                score=f.score,
                snippet=s,
                tags=f.item.tags,
                source=f.item.source,
                match=how,
            )
            for (f, how), s in zip(matched, cut, strict=True)
        ]

    async def get(self, memory_id: str) -> MemoryItem:
        """The item with this id (in this tenant/project)."""
        item = await self.store.get(_check_memory_id(memory_id))
        if item is None:
            raise NotFoundError(f"no memory item {memory_id} here; recall or list to find existing ids")
        return item

    async def read(self, uri: str) -> MemoryItem:
        """The item at this ``memory://`` URI."""
        parse_uri(uri)
        item = await self.store.at(uri)
        if item is None:
            raise NotFoundError(f"nothing is remembered at {uri}; list('{PREFIX}') shows what is")
        return item

    async def ids(self, prefix: str = "", limit: int = 100) -> builtins.list[str]:
        """Ids of this scope's items that start with ``prefix``, newest first (for completion)."""
        check_id_search(prefix, limit)
        return await self.store.ids(prefix, limit)

    async def list(
        self, prefix: str = PREFIX, limit: int = 100, *, after: str | None = None
    ) -> builtins.list[MemoryItem]:
        """Items whose URI starts with ``prefix`` (e.g. ``memory://user/``), in URI order.

        For the next page, pass the last URI of this one as ``after``.
        """
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIST:
            raise InvalidInputError(f"limit must be a whole number from 1 to {MAX_LIST} (got {limit!r})")
        if after is not None and not isinstance(after, str):
            raise InvalidInputError("after must be the last URI of the previous page")
        return await self.store.scan(check_prefix(prefix), limit, after)

    async def browse(
        self, prefix: str = PREFIX, *, cursor: str | None = None, limit: int = 50
    ) -> tuple[builtins.list[MemoryItem], builtins.list[tuple[str, int]], str | None]:
        """The tree under ``prefix`` one level deep: the items directly under it, the child prefixes
        (ending in ``/``) with how many items each holds, and the cursor of the next page (None at
        the end). Items and children are paged together, in URI order.

        A cursor is the id of an item of the page's last entry (that item, or one under that child
        prefix): an id is short, and the page after it is the same whatever was written since.
        """
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIST:
            raise InvalidInputError(f"limit must be a whole number from 1 to {MAX_LIST} (got {limit!r})")
        check_prefix(prefix)
        after = None
        if cursor is not None:
            last = await self.store.get(_check_memory_id(cursor))
            if last is None or not last.uri.startswith(prefix):
                raise InvalidInputError(
                    "cursor must be a next_cursor of this prefix whose item is still there; list from the start"
                )
            head, sep, _ = last.uri[len(prefix) :].partition("/")
            after = prefix + head + "/" if sep else last.uri
        entries = await self.store.tree(prefix, after, limit + 1)
        page = entries[:limit]
        items = [e for _, e, _ in page if isinstance(e, MemoryItem)]
        children = [(key, e) for key, e, _ in page if isinstance(e, int)]
        return items, children, page[-1][2] if len(entries) > limit else None

    async def forget(self, *, memory_id: str | None = None, uri: str | None = None, prefix: str | None = None) -> int:
        """Delete the item with ``memory_id``, at ``uri``, or every item under ``prefix``; returns how many.

        Exactly one of the three must be given. Forgetting what is not there deletes nothing (0).
        """
        if sum(x is not None for x in (memory_id, uri, prefix)) != 1:
            raise InvalidInputError("forget needs exactly one of memory_id, uri or prefix")
        if memory_id is not None:
            _check_memory_id(memory_id)
        if uri is not None:
            parse_uri(uri)
        if prefix is not None and len(check_prefix(prefix)) <= len(PREFIX):
            raise InvalidInputError("forget(prefix=...) needs at least a scope, like 'memory://session/ses_…/'")
        return await self.store.delete(memory_id=memory_id, uri=uri, prefix=prefix)

    async def commit(
        self, session_id: str, *, scope: str = "session", extractor: Extractor | None = None
    ) -> CommitResult:
        """Archive a session's transcript and remember what ``extractor`` picks out of it.

        The transcript goes to ``memory://session/<session_id>/transcript``; extracted texts go to
        ``memory://{scope}/<session_id>/<hash of the text>``. A text the scope already holds (the
        same fact extracted from an earlier snapshot of the conversation, say) is not stored again:
        ``items`` then holds the existing item. Transcripts of ancestors that this one contains
        whole leave the search index (``superseded``). Everything is written in one transaction.
        """
        check_scope(scope)
        session = await self.sessions.get(session_id)
        texts = await (extractor or HeuristicExtractor())(list(session.chunks))
        if not isinstance(texts, builtins.list) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError("an extractor must return a list of strings")
        archived_uri = make_uri("session", f"{session.id}/transcript")
        archive = NewMemory(archived_uri, "session", transcript(session), ("transcript",), session.id)
        superseded = await self._superseded_transcripts(session.id, transcript_body(archive.content))
        extracted = [
            NewMemory(
                make_uri(scope, check_path(f"{session.id}/{hashlib.sha256(t.encode()).hexdigest()[:12]}")),
                scope,
                check_content(t),
                ("extracted",),
                session.id,
                once_per_scope=True,
            )
            for t in dict.fromkeys(t.strip() for t in texts)
            if t
        ]
        stored = await self.store.put([archive, *extracted], supersede=superseded)
        self._written(stored)
        return CommitResult(
            archived_uri=archived_uri,
            extracted_count=len(extracted),
            items=tuple(stored[1:]),
            superseded=tuple(superseded),
        )

    async def _superseded_transcripts(self, session_id: str, body: str) -> builtins.list[str]:
        """URIs of ancestors' transcripts that this one contains whole (earlier snapshots of the
        same conversation, as an agent committing after every turn leaves): they leave the search
        index, so recall finds the conversation once, and stay readable at their URIs."""
        out = []
        for ancestor in await self.sessions.ancestors(session_id, depth=SUPERSEDE_DEPTH):
            uri = make_uri("session", f"{ancestor}/transcript")
            item = await self.store.at(uri)
            if item is not None and SUPERSEDED not in item.tags and body.startswith(transcript_body(item.content)):
                out.append(uri)
        return out
