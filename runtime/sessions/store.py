"""What the session engine needs from a store: the ``SessionStore`` protocol and the records it speaks.

The store knows rows and segments; the semantics of fork, merge and lineage live in
``runtime.sessions.service`` so that every store implementation shares them. Implementations:
``runtime.store.sqlite.sessions`` (the embedded default), ``runtime.sessions.memory_store`` (the
in-memory fake) and, later, the PostgreSQL backend. Each method is one whole unit of work (one
transaction): a write is all or nothing, a read is one consistent snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

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


#: A lineage-only node (an ancestor known from an import) and its parents.
Stub = tuple[LineageNode, tuple[str, ...]]

#: Builds the sessions to write from a base session's current fields (see ``SessionStore.insert_on``).
BuildOn = Callable[[SessionInfo], list[NewSession]]


class SessionStore(Protocol):
    """What the session engine needs from a store. Every call is scoped to one tenant/project.

    ``insert`` writes lineage stubs then sessions, all or none. ``insert_on`` reads a base session
    and writes what ``build`` makes of its current fields in the same transaction (``build`` is
    quick and pure; if it raises, nothing is written). Reads raise ``NotFoundError`` for an id that
    is not a (non-stub) session of this scope. ``ids`` is newest first; ``page`` is newest first
    below ``after``; ``ancestry`` maps every session in the history of the given ones to its own
    usage (stubs count zero).
    """

    async def insert(self, sessions: list[NewSession], stubs: Sequence[Stub] = ()) -> list[SessionInfo]: ...
    async def insert_on(self, base_id: str, build: BuildOn) -> list[SessionInfo]: ...
    async def info(self, session_id: str) -> SessionInfo: ...
    async def chunks(self, session_id: str, offset: int = 0, limit: int | None = None) -> list[StoredChunk]: ...
    async def snapshot(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> tuple[SessionInfo, list[StoredChunk]]: ...
    async def uids(self, session_id: str) -> list[str]: ...
    async def page(self, after: str | None, limit: int) -> list[SessionInfo]: ...
    async def ids(self, prefix: str, limit: int) -> list[str]: ...
    async def lineage(
        self, session_id: str, depth: int, *, up: bool, down: bool, max_nodes: int
    ) -> tuple[list[LineageNode], list[LineageEdge], bool]: ...
    async def ancestry(self, session_ids: Sequence[str]) -> dict[str, Usage]: ...
