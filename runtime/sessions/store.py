"""What the session engine needs from a store: the ``SessionStore`` protocol and the records it speaks.

The store knows rows and segments; the semantics of fork, merge and lineage live in
``runtime.sessions.service`` so that every store implementation shares them. Implementations:
``runtime.store.core.sessions`` (on SQLite, the embedded default, and PostgreSQL) and
``runtime.sessions.in_memory`` (the in-memory fake). Each method is one whole unit of work (one
transaction): a write is all or nothing, a read is one consistent snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from pydantic import TypeAdapter

from runtime.sessions.model import Chunk, LineageEdge, LineageNode, Placement, SessionInfo, SessionOp, Usage


class StoredChunk(NamedTuple):
    """A chunk with its identity: ``uid`` survives copies (merge, import) and names the same message.

    A named tuple, not a dataclass: tens of thousands are made per long read, and it is cheaper to make."""

    uid: str
    chunk: Chunk


@dataclass(frozen=True)
class NewSession:
    """What a write of one session needs. ``base_of`` shares another session's chunks (no copy)."""

    op: SessionOp
    parents: tuple[str, ...]
    chunks: tuple[StoredChunk, ...]
    placement: Placement
    usage: Usage
    metadata: dict[str, Any]
    base_of: str | None = None
    id: str | None = None
    created_at: float | None = None
    own_usage: Usage | None = None  # what it adds over its parents' history; None: all of ``usage``


@dataclass(frozen=True)
class BranchTails:
    """What a merge needs of its branches, read past the history they share *by structure*.

    Before ``start`` every branch holds the very same stored chunks (one segment chain), so their
    uids agree there and nothing of it is read. ``tails[k]`` are branch ``k``'s uids from ``start``
    on: the first branch's only as far as the shortest other branch reaches (enough to find where
    the shared prefix ends), the others' to their ends. ``in_first`` is which of the later branches'
    tail uids the first branch holds anywhere (its shared part included), found by an index, not
    by reading the first branch. A merge then costs what the branches add, not what they share.
    """

    start: int
    tails: tuple[tuple[str, ...], ...]
    in_first: frozenset[str]


#: A lineage-only node (an ancestor known from an import) and its parents.
Stub = tuple[LineageNode, tuple[str, ...]]

#: Builds the sessions to write from a base session's current fields (see ``SessionStore.insert_on``).
BuildOn = Callable[[SessionInfo], list[NewSession]]


class SessionStore(Protocol):
    """What the session engine needs from a store. Every call is scoped to one tenant/project.

    ``insert`` writes lineage stubs then sessions, all or none. ``insert_on`` reads a base session and writes
    what ``build`` makes of its current fields in the same transaction (``build`` is quick and pure; if it
    raises, nothing is written); ``small`` says what it makes is a few rows of modest size (a fork, a short
    append), which a backend may commit without a thread hop. Reads raise ``NotFoundError`` for an id that is
    not a (non-stub) session of this scope. ``ids`` is newest first; ``page`` is newest first below ``after``;
    ``ancestry`` maps every session in the history of the given ones to its own usage (stubs count zero).
    ``branch_tails`` is what merge compares (see ``BranchTails``).
    """

    async def insert(self, sessions: list[NewSession], stubs: Sequence[Stub] = ()) -> list[SessionInfo]: ...
    async def insert_on(self, base_id: str, build: BuildOn, *, small: bool = False) -> list[SessionInfo]: ...
    async def info(self, session_id: str) -> SessionInfo: ...
    async def chunks(self, session_id: str, offset: int = 0, limit: int | None = None) -> list[StoredChunk]: ...
    async def snapshot(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> tuple[SessionInfo, list[StoredChunk]]: ...
    async def uids(self, session_id: str) -> list[str]: ...
    async def branch_tails(self, session_ids: Sequence[str]) -> BranchTails: ...
    async def page(self, after: str | None, limit: int) -> list[SessionInfo]: ...
    async def ids(self, prefix: str, limit: int) -> list[str]: ...
    async def lineage(
        self, session_id: str, depth: int, *, up: bool, down: bool, max_nodes: int
    ) -> tuple[list[LineageNode], list[LineageEdge], bool]: ...
    async def ancestry(self, session_ids: Sequence[str]) -> dict[str, Usage]: ...


# -- segment ranges -------------------------------------------------------------------------
# For the stores that keep chunks in segments (SQLite, PostgreSQL): a session is ``(segment,
# length)`` and its chunks are the *ranges* ``(segment, lo, hi)`` of its segment chain, root first.
# A chunk's ``idx`` is its position in every session that holds it, so two sessions whose chains
# begin with the same ranges hold the very same stored chunks there (``BranchTails.start``).

Range = tuple[str, int, int]


def shared_start(chains: Sequence[Sequence[Range]]) -> int:
    """How many leading positions every chain holds in the same segments (the same stored chunks).

    Walks the chains from their roots while they agree: at the first range that is not the same
    segment from the same position in all of them, or that some end earlier than others, it stops.
    """
    start = 0
    for column in zip(*chains, strict=False):
        segment, lo, _ = column[0]
        if any(r[0] != segment or r[1] != lo for r in column):
            break
        ends = {hi for _, _, hi in column}
        start = min(ends)
        if len(ends) > 1:
            break
    return start  # a chain that ran out first is all shared: it is a prefix of the others


def clip(ranges: Sequence[Range], lo: int, hi: int) -> list[Range]:
    """The part of ``ranges`` within positions ``[lo, hi)``, empty ranges left out."""
    out = [(segment, max(a, lo), min(b, hi)) for segment, a, b in ranges]
    return [r for r in out if r[1] < r[2]]


def holds(ranges: Sequence[Range], segment: str, idx: int) -> bool:
    """Whether the stored chunk ``(segment, idx)`` is one of those ``ranges`` cover."""
    return any(s == segment and lo <= idx < hi for s, lo, hi in ranges)


# -- rows, for the SQL stores ----------------------------------------------------------------
def info_from(row: Any, parents: Sequence[str]) -> SessionInfo:
    """A session row (any mapping of the ``sessions`` columns, placement/usage/metadata as JSON text)."""
    return SessionInfo(
        id=row["id"],
        parents=tuple(parents),
        op=row["op"],
        length=row["length"],
        placement=Placement.model_validate_json(row["placement"]),
        usage=Usage.model_validate_json(row["usage"]),
        metadata=json.loads(row["metadata"]),
        created_at=row["created_at"],
        tenant=row["tenant"],
        project=row["project"],
    )


#: Chunks are validated a list at a time: one call into pydantic-core instead of one per chunk.
_CHUNK_LIST = TypeAdapter(list[Chunk])


def chunks_from(rows: Sequence[Sequence[Any]]) -> list[StoredChunk]:
    """Rows of ``(uid, kind, content, tool_calls JSON or None, tool_call_id, name, trust)`` as stored chunks.

    A chunk written before trust was stored (migration ``chunk_trust``) has none: its kind's default."""
    fields = [
        {
            "kind": kind,
            "content": content,
            "tool_calls": json.loads(tool_calls) if tool_calls is not None else None,
            "tool_call_id": tool_call_id,
            "name": name,
            "trust": trust,
        }
        for _, kind, content, tool_calls, tool_call_id, name, trust in rows
    ]
    return [StoredChunk(row[0], chunk) for row, chunk in zip(rows, _CHUNK_LIST.validate_python(fields), strict=True)]
