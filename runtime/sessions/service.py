"""The Session engine: create, append, fork, detach, merge, lineage — over any ``SessionStore``.

Every operation yields new immutable snapshots; nothing is ever modified in place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio.to_thread

from runtime.errors import ConflictError, InvalidInputError, NotFoundError
from runtime.ids import check_id_search
from runtime.sessions import jsonl, openrath
from runtime.sessions.inputs import as_chunks, fresh, json_object, model_of
from runtime.sessions.merge import merged_tail_of, total_usage
from runtime.sessions.model import (
    Chunk,
    LineageGraph,
    Placement,
    Session,
    SessionInfo,
    SessionOp,
    Usage,
)
from runtime.sessions.store import NewSession, SessionStore, StoredChunk

if TYPE_CHECKING:
    from runtime.secrets import Redactor

MergeStrategy = Literal["append", "concat"]
MAX_FORK_COUNT = 64
#: A write of at most this many sessions or new chunks, and under this many characters of them, is
#: small (``SessionStore.insert_on``): the store may commit it without a thread hop.
SMALL_WRITE_CHUNKS = 8
SMALL_WRITE_CHARS = 64_000
#: Chunks per read when a whole session is streamed (``pages``): a page costs the same wherever it
#: starts, so a long session streams in time linear in its length and memory of one page.
STREAM_PAGE = 500
INLINE_PARSE_CHARS = 16_000  # an import this small parses in about a millisecond: not worth a thread hop


class SessionService:
    """Session operations for one tenant/project, reached as ``runtime.sessions``."""

    def __init__(self, store: SessionStore, redactor: Redactor | None = None) -> None:
        self.store = store
        self.redactor = redactor  # secrets resolved in this process never reach a chunk (runtime.secrets)

    # -- reading ---------------------------------------------------------------------------
    async def get(self, session_id: str) -> Session:
        """The whole session, chunks included."""
        info, stored = await self.store.snapshot(session_id)
        return Session(**dict(info), chunks=tuple(sc.chunk for sc in stored))

    async def window(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> tuple[SessionInfo, list[Chunk]]:
        """The session's fields and one page of its chunks, read together (a consistent view)."""
        _check_page(offset, limit)
        info, stored = await self.store.snapshot(session_id, offset, limit)
        return info, [sc.chunk for sc in stored]

    async def info(self, session_id: str) -> SessionInfo:
        """The session without its chunks (cheap at any length)."""
        return await self.store.info(session_id)

    async def chunks(self, session_id: str, offset: int = 0, limit: int | None = None) -> list[Chunk]:
        """A page of a session's chunks."""
        _check_page(offset, limit)
        return [sc.chunk for sc in await self.store.chunks(session_id, offset, limit)]

    async def pages(self, session_id: str, size: int = STREAM_PAGE) -> AsyncIterator[list[Chunk]]:
        """Every chunk of a session, a page at a time: a full read that never builds the whole session."""
        async for stored in self._stored_pages(session_id, size):
            yield [sc.chunk for sc in stored]

    async def _stored_pages(self, session_id: str, size: int) -> AsyncIterator[list[StoredChunk]]:
        if size < 1:
            raise InvalidInputError("a page holds at least one chunk")
        length = (await self.store.info(session_id)).length  # a session never changes: its pages agree
        for offset in range(0, length, size):
            yield await self.store.chunks(session_id, offset, size)

    async def ids(self, prefix: str = "", limit: int = 100) -> list[str]:
        """Ids of this scope's sessions that start with ``prefix``, newest first (for completion)."""
        check_id_search(prefix, limit)
        return await self.store.ids(prefix, limit)

    async def page(self, cursor: str | None = None, limit: int = 50) -> tuple[list[SessionInfo], str | None]:
        """Sessions newest first; returns a page and the cursor of the next page (None at the end)."""
        if not 1 <= limit <= 500:
            raise InvalidInputError("limit must be between 1 and 500")
        page = await self.store.page(cursor, limit + 1)
        more = len(page) > limit
        page = page[:limit]
        return page, (page[-1].id if more and page else None)

    # -- writing ---------------------------------------------------------------------------
    @staticmethod
    def new_empty(metadata: dict[str, Any] | None = None) -> NewSession:
        """What ``create([], metadata=metadata)`` writes, for a store to write inside another of its
        writes (``StepCommit.output_session``)."""
        return NewSession(
            op="create", parents=(), chunks=(), placement=Placement(), usage=Usage(), metadata=json_object(metadata)
        )

    async def create(
        self,
        chunks: Sequence[Chunk | dict[str, Any]] = (),
        *,
        placement: Placement | dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        usage: Usage | dict[str, Any] | None = None,
    ) -> Session:
        """A new root session holding ``chunks``."""
        items = self._redacted(as_chunks(chunks))
        placement, usage = model_of(Placement, placement, "placement"), model_of(Usage, usage, "usage")
        (info,) = await self.store.insert(
            [
                NewSession(
                    op="create",
                    parents=(),
                    chunks=fresh(items),
                    placement=placement or Placement(),
                    usage=usage or Usage(),
                    metadata=json_object(metadata),
                )
            ]
        )
        return Session(**info.model_dump(), chunks=tuple(items))

    async def append(
        self,
        session_id: str,
        chunks: Sequence[Chunk | dict[str, Any]],
        *,
        usage: Usage | dict[str, Any] | None = None,
        op: SessionOp = "append",
        metadata: dict[str, Any] | None = None,
    ) -> SessionInfo:
        """A new snapshot: the session plus ``chunks``; ``usage`` is added, ``metadata`` merged in.

        Costs the new chunks only, whatever the session's length (no read of its history).
        """
        items = self._redacted(as_chunks(chunks))
        usage = model_of(Usage, usage, "usage")
        own, extra, added = usage or Usage(), json_object(metadata), fresh(items)
        small = len(added) <= SMALL_WRITE_CHUNKS and sum(len(c.content) for c in items) < SMALL_WRITE_CHARS
        (info,) = await self.store.insert_on(
            session_id,
            lambda base: [
                NewSession(
                    op=op,
                    parents=(session_id,),
                    chunks=added,
                    placement=base.placement,
                    usage=base.usage + own,
                    metadata={**base.metadata, **extra},
                    base_of=session_id,
                    own_usage=own,
                )
            ],
            small=small,
        )
        return info

    def _redacted(self, chunks: list[Chunk]) -> list[Chunk]:
        redactor = self.redactor
        if not redactor:  # no secret resolved in this process: nothing to look for
            return chunks
        out = []
        for c in chunks:
            content = redactor.text(c.content)
            calls = c.tool_calls and tuple(
                t.model_copy(update={"function": t.function.model_copy(update={"arguments": redactor.text(args)})})
                for t in c.tool_calls
                for args in (t.function.arguments,)
            )
            out.append(c.model_copy(update={"content": content, "tool_calls": calls}))
        return out

    async def fork(
        self, session_id: str, count: int = 1, *, placements: Sequence[Placement | dict[str, Any]] | None = None
    ) -> list[SessionInfo]:
        """``count`` children sharing the session's chunks (O(1) each: nothing is copied)."""
        if not 1 <= count <= MAX_FORK_COUNT:
            raise InvalidInputError(f"count must be between 1 and {MAX_FORK_COUNT}, got {count}")
        if placements is not None and len(placements) != count:
            raise InvalidInputError("give one placement per fork")
        places = [model_of(Placement, p, "placement") for p in placements] if placements is not None else None
        return await self.store.insert_on(
            session_id,
            lambda base: [
                NewSession(
                    op="fork",
                    parents=(session_id,),
                    chunks=(),
                    placement=places[i] or base.placement if places else base.placement,
                    usage=base.usage,
                    metadata=dict(base.metadata),
                    base_of=session_id,
                    own_usage=Usage(),
                )
                for i in range(count)
            ],
            small=count <= SMALL_WRITE_CHUNKS,
        )

    async def detach(self, session_id: str) -> SessionInfo:
        """A new root (no parents) with the same chunks, placement, usage and metadata."""
        (info,) = await self.store.insert_on(
            session_id,
            lambda base: [
                NewSession(
                    op="detach",
                    parents=(),
                    chunks=(),
                    placement=base.placement,
                    usage=base.usage,
                    metadata=dict(base.metadata),
                    base_of=session_id,
                )
            ],
            small=True,
        )
        return info

    async def derive(
        self,
        parents: Sequence[str],
        chunks: Sequence[Chunk | dict[str, Any]],
        *,
        op: SessionOp,
        usage: Usage | dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        placement: Placement | dict[str, Any] | None = None,
    ) -> SessionInfo:
        """A session with new content whose lineage points at ``parents`` (compress, run results).

        ``usage`` is the session's whole usage; by default that of the parents' history (each
        ancestor once), so a run or compress result carries what led to it.
        """
        items = as_chunks(chunks)
        placement, usage = model_of(Placement, placement, "placement"), model_of(Usage, usage, "usage")
        infos = [await self.store.info(p) for p in parents]
        first = infos[0] if infos else None
        shared = total_usage((await self.store.ancestry(list(parents))).values()) if parents else Usage()
        total = usage if usage is not None else shared
        (info,) = await self.store.insert(
            [
                NewSession(
                    op=op,
                    parents=tuple(parents),
                    chunks=fresh(items),
                    placement=placement or (first.placement if first else Placement()),
                    usage=total,
                    metadata=json_object(metadata) if metadata is not None else dict(first.metadata if first else {}),
                    own_usage=total.minus(shared),
                )
            ]
        )
        return info

    async def merge(self, session_ids: Sequence[str], strategy: MergeStrategy = "append") -> SessionInfo:
        """Join branches into one session.

        ``append`` (default): the prefix the branches share, once, then each branch's own chunks in
        argument order; usage is the common ancestor's plus each branch's delta (precisely: every
        session of the branches' joint history counted once, see ``runtime.sessions.merge``), the
        plain sum when they share no ancestor. ``concat``: OpenRath's plain concatenation of every
        branch's chunks, usage summed. The first branch's placement is kept.
        """
        ids = list(session_ids)
        if len(ids) < 2:
            raise InvalidInputError("merge needs at least two session ids")
        if len(set(ids)) != len(ids):
            raise InvalidInputError("merge got the same session id twice; pass each branch once")
        if strategy not in ("append", "concat"):
            raise InvalidInputError(f"unknown merge strategy {strategy!r}; use 'append' or 'concat'")
        infos = [await self.store.info(i) for i in ids]
        metadata: dict[str, Any] = {}
        for info in infos:
            metadata.update(info.metadata)
        shared = total_usage((await self.store.ancestry(ids)).values())  # each ancestor once
        if strategy == "concat":
            usage = sum((i.usage for i in infos), Usage())
            prefix_len, rest = 0, [sc for i in ids[1:] for sc in await self.store.chunks(i)]
        else:
            usage = shared
            prefix_len, picks = merged_tail_of(await self.store.branch_tails(ids))
            rest = await self._picked(ids, picks)
        # The first branch's chunks are shared as they are; the others' new chunks are copied
        # after them, keeping their uid so later merges still recognise them.
        (info,) = await self.store.insert(
            [
                NewSession(
                    op="merge",
                    parents=tuple(ids),
                    chunks=tuple(rest),
                    placement=infos[0].placement,
                    usage=usage,
                    metadata={**metadata, "merge_strategy": strategy, "shared_prefix": prefix_len},
                    base_of=ids[0],
                    own_usage=usage.minus(shared),  # concat counts shared usage again: that is its own
                )
            ]
        )
        return info

    async def _picked(self, ids: list[str], picks: list[tuple[int, int]]) -> list[StoredChunk]:
        """The chunks at ``(branch, position)``, in order; each branch read only over the span it gives."""
        out: list[StoredChunk] = []
        for k in dict.fromkeys(k for k, _ in picks):
            positions = [i for b, i in picks if b == k]
            lo = positions[0]
            span = await self.store.chunks(ids[k], lo, positions[-1] - lo + 1)
            out.extend(span[i - lo] for i in positions)
        return out

    # -- lineage -----------------------------------------------------------------------------
    async def lineage(
        self, session_id: str, depth: int = 20, *, up: bool = True, down: bool = True, max_nodes: int = 500
    ) -> LineageGraph:
        """The lineage DAG within ``depth`` steps of a session: nodes, edges, and ``.mermaid()``.

        At most ``max_nodes`` nodes (a session with thousands of forks stays cheap to ask about);
        ``truncated`` tells when there was more.
        """
        if not 1 <= depth <= 1000:
            raise InvalidInputError("depth must be between 1 and 1000")
        if not 1 <= max_nodes <= 100_000:
            raise InvalidInputError("max_nodes must be between 1 and 100000")
        nodes, edges, truncated = await self.store.lineage(session_id, depth, up=up, down=down, max_nodes=max_nodes)
        return LineageGraph(root=session_id, nodes=tuple(nodes), edges=tuple(edges), truncated=truncated)

    async def ancestors(self, session_id: str, depth: int = 1000) -> list[str]:
        """Ids of every ancestor within ``depth`` steps (at most 100,000), oldest first."""
        graph = await self.lineage(session_id, depth, down=False, max_nodes=100_000)
        return [n.id for n in graph.nodes if n.id != session_id]

    async def descendants(self, session_id: str, depth: int = 1000) -> list[str]:
        """Ids of every descendant within ``depth`` steps (at most 100,000), oldest first."""
        graph = await self.lineage(session_id, depth, up=False, max_nodes=100_000)
        return [n.id for n in graph.nodes if n.id != session_id]

    # -- JSONL -------------------------------------------------------------------------------
    async def export_jsonl(self, session_id: str) -> str:
        """The session as JSONL: a header line, one line per chunk, then its ancestry (lineage only)."""
        return "".join([line async for line in self.export_lines(session_id)])

    async def export_lines(self, session_id: str) -> AsyncIterator[str]:
        """``export_jsonl`` a line at a time (each ends in a newline), the chunks read a page at a time."""
        info = await self.store.info(session_id)
        graph = await self.lineage(session_id, 1000, down=False, max_nodes=100_000)
        yield jsonl.header_line(info)
        async for stored in self._stored_pages(session_id, STREAM_PAGE):
            for line in jsonl.chunk_lines(stored):
                yield line
        parents: dict[str, list[str]] = {}
        for edge in graph.edges:
            parents.setdefault(edge.child, []).append(edge.parent)
        for node in graph.nodes:
            if node.id != session_id:
                yield jsonl.ancestor_line(node, tuple(parents.get(node.id, [])))

    async def import_jsonl(
        self, text: str, check_placement: Callable[[Placement], object] | None = None
    ) -> SessionInfo:
        """Restore an exported session under its own id, with its lineage. Idempotent.

        A session file OpenRath 2.0.0 saved is recognised by its header and imported as
        ``runtime.sessions.openrath`` says (op ``import``, chunks ``trust: external``).

        Importing the same file twice returns the same session; an id that exists here with
        different content is a clear error. Malformed input writes nothing: ``check_placement``
        (the sandbox registry's check, which this layer does not know) vets the header's placement,
        and every parent must be here already or come with the export's ancestors.
        """
        # Parsing is CPU work proportional to the text (a line of JSON and a model check each): a large
        # import is parsed on a worker thread, so the event loop goes on serving other requests meanwhile.
        parse_here = not isinstance(text, str) or len(text) <= INLINE_PARSE_CHARS
        if isinstance(text, str) and openrath.is_openrath(text):  # a session file OpenRath 2.0.0 saved
            saved = openrath.parse(text) if parse_here else await anyio.to_thread.run_sync(openrath.parse, text)
            return await openrath.import_openrath(self.store, saved)
        doc = jsonl.parse(text) if parse_here else await anyio.to_thread.run_sync(jsonl.parse, text)
        header = doc.header
        if check_placement is not None:
            check_placement(header.placement)
        try:
            current, same = await self.store.snapshot(header.id)
        except NotFoundError:
            pass  # new here, or known only as an ancestor of an earlier import (a stub): fill it in
        else:
            scope = {"tenant", "project"}
            if [sc.chunk for sc in same] == [c.chunk for c in doc.chunks] and current.model_dump(
                exclude=scope
            ) == header.model_dump(exclude=scope):
                return current
            raise ConflictError(
                f"session {header.id} already exists here with different content; "
                "import into another home, or export the existing one to compare"
            )
        known = await self.store.ancestry(list(header.parents)) if header.parents else {}
        missing = set(header.parents) - set(known) - {node.id for node, _ in doc.ancestors}
        if missing:
            raise InvalidInputError(
                f"line 1 of the JSONL: parent {sorted(missing)[0]} is neither in this store nor among the "
                "export's ancestor lines; export the session again (it lists its ancestry) or import its parent first"
            )
        new = NewSession(
            own_usage=header.usage.minus(total_usage(known.values())),
            op=header.op,
            parents=header.parents,
            chunks=tuple(doc.chunks),
            placement=header.placement,
            usage=header.usage,
            metadata=header.metadata,
            id=header.id,
            created_at=header.created_at,
        )
        (info,) = await self.store.insert([new], stubs=doc.ancestors)  # one transaction: all or nothing
        return info


def _check_page(offset: int, limit: int | None) -> None:
    if offset < 0 or (limit is not None and limit < 0):
        raise InvalidInputError("offset and limit must be zero or more")
