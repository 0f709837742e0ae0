"""``InMemorySessionStore``: the shipped fake of ``SessionStore``, a real implementation in plain Python.

It keeps everything in dicts of one ``InMemoryHome`` (shared by the stores of every tenant/project,
as one database file is), so tests and embedders can run the session engine with no file at all,
and so the engine's semantics are shown not to depend on SQLite: the same property tests run over
both stores. Chunks are shared by reference: a fork holds the same tuple as its parent.
Not durable, and not meant for large sessions (an append copies the tuple of references).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from runtime.errors import ConflictError, NotFoundError
from runtime.ids import new_id, now
from runtime.sessions.lineage import walk
from runtime.sessions.merge import shared_prefix
from runtime.sessions.model import LineageEdge, LineageNode, SessionInfo, Usage
from runtime.sessions.store import BranchTails, BuildOn, NewSession, StoredChunk, Stub


@dataclass
class _Row:
    info: SessionInfo
    chunks: tuple[StoredChunk, ...]
    own_usage: Usage
    stub_op: str | None = None  # set for a lineage-only node: its op as the import gave it


@dataclass
class InMemoryHome:
    """Every session of every tenant/project, by id (ids are unique per home)."""

    rows: dict[str, _Row] = field(default_factory=dict)


class InMemorySessionStore:
    """A ``SessionStore`` over an ``InMemoryHome``, scoped to one tenant/project."""

    def __init__(self, home: InMemoryHome, tenant: str = "local", project: str = "default") -> None:
        self.home = home
        self.tenant = tenant
        self.project = project

    def _mine(self, session_id: str) -> _Row | None:
        row = self.home.rows.get(session_id)
        if row is None or (row.info.tenant, row.info.project) != (self.tenant, self.project):
            return None
        return row

    def _get(self, session_id: str) -> _Row:
        row = self._mine(session_id)
        if row is None or row.stub_op is not None:
            raise NotFoundError(
                f"no session {session_id!r} in {self.tenant}/{self.project}; "
                "list sessions with session_list (or `rath-mcp sessions list`) to find a valid id"
            )
        return row

    async def insert(self, sessions: list[NewSession], stubs: Sequence[Stub] = ()) -> list[SessionInfo]:
        """All or nothing: every row is built first, then all are stored."""
        staged: dict[str, _Row] = {}
        for node, parents in stubs:
            if node.id not in self.home.rows and node.id not in staged:
                staged[node.id] = self._stub(node, parents)
        made = []
        for new in sessions:
            row = self._build(new, staged)
            staged[row.info.id] = row
            made.append(row.info)
        self.home.rows.update(staged)
        return made

    async def insert_on(self, base_id: str, build: BuildOn, *, small: bool = False) -> list[SessionInfo]:
        """``build`` from the base's fields, then insert (no await between: atomic on one event loop)."""
        return await self.insert(build(self._get(base_id).info))

    def _build(self, new: NewSession, staged: dict[str, _Row]) -> _Row:
        base = staged.get(new.base_of) if new.base_of else None
        chunks = (base or self._get(new.base_of)).chunks if new.base_of else ()
        session_id = new.id or new_id("ses")
        if new.id is not None:
            taken = self.home.rows.get(new.id)
            if taken is not None and not (taken.stub_op is not None and self._mine(new.id)):
                raise ConflictError(
                    f"session id {new.id} is already used in this home (in this or another tenant/project); "
                    "import it into another home"
                )
        info = SessionInfo(
            id=session_id,
            parents=new.parents,
            op=new.op,
            length=len(chunks) + len(new.chunks),
            placement=new.placement,
            usage=new.usage,
            metadata=new.metadata,
            created_at=new.created_at if new.created_at is not None else now(),
            tenant=self.tenant,
            project=self.project,
        )
        own = new.own_usage if new.own_usage is not None else new.usage
        return _Row(info, chunks + new.chunks, own)

    def _stub(self, node: LineageNode, parents: tuple[str, ...]) -> _Row:
        info = SessionInfo(
            id=node.id,
            parents=parents,
            op="import",  # placeholder: a stub is never read as a session; stub_op is what lineage shows
            length=node.length,
            created_at=node.created_at,
            tenant=self.tenant,
            project=self.project,
        )
        return _Row(info, (), Usage(), stub_op=node.op)

    async def info(self, session_id: str) -> SessionInfo:
        return self._get(session_id).info

    async def chunks(self, session_id: str, offset: int = 0, limit: int | None = None) -> list[StoredChunk]:
        chunks = self._get(session_id).chunks
        return list(chunks[offset : None if limit is None else offset + limit])

    async def snapshot(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> tuple[SessionInfo, list[StoredChunk]]:
        return await self.info(session_id), await self.chunks(session_id, offset, limit)

    async def uids(self, session_id: str) -> list[str]:
        return [sc.uid for sc in self._get(session_id).chunks]

    async def branch_tails(self, session_ids: Sequence[str]) -> BranchTails:
        """From whole branches (this fake shares tuples, not segments), cut where their uids part."""
        branches = [[sc.uid for sc in self._get(i).chunks] for i in session_ids]
        start, reach = shared_prefix(branches), min(len(b) for b in branches[1:])
        tails = (tuple(branches[0][start:reach]), *(tuple(b[start:]) for b in branches[1:]))
        later = {uid for tail in tails[1:] for uid in tail}
        return BranchTails(start, tails, frozenset(later.intersection(branches[0])))

    async def page(self, after: str | None, limit: int) -> list[SessionInfo]:
        ids = sorted((i for i, r in self.home.rows.items() if r.stub_op is None and self._mine(i)), reverse=True)
        return [self.home.rows[i].info for i in ids if after is None or i < after][:limit]

    async def ids(self, prefix: str, limit: int) -> list[str]:
        mine = (i for i, r in self.home.rows.items() if r.stub_op is None and i.startswith(prefix) and self._mine(i))
        return sorted(mine, reverse=True)[:limit]

    async def lineage(
        self, session_id: str, depth: int, *, up: bool, down: bool, max_nodes: int
    ) -> tuple[list[LineageNode], list[LineageEdge], bool]:
        self._get(session_id)

        def parents(sid: str) -> tuple[str, ...]:
            row = self._mine(sid)
            return row.info.parents if row else ()

        def children(sid: str) -> list[str]:
            return sorted(i for i, r in self.home.rows.items() if sid in r.info.parents and self._mine(i))

        return walk(
            session_id,
            depth,
            up=up,
            down=down,
            max_nodes=max_nodes,
            parents=parents,
            children=children,
            node=self._node,
        )

    def _node(self, session_id: str) -> LineageNode | None:
        row = self._mine(session_id)
        if row is None:
            return None
        i = row.info
        stub = row.stub_op is not None
        return LineageNode(id=i.id, op=row.stub_op or i.op, length=i.length, created_at=i.created_at, stub=stub)

    async def ancestry(self, session_ids: Sequence[str]) -> dict[str, Usage]:
        out: dict[str, Usage] = {}
        stack = list(session_ids)
        while stack:
            row = self._mine(sid := stack.pop())
            if row is None or sid in out:
                continue
            out[sid] = row.own_usage
            stack.extend(row.info.parents)
        return out
