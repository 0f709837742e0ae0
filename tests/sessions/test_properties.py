"""Random sequences of session ops, checked against a plain-Python model of the semantics.

The model knows nothing of segments, uids or SQL: a session is a list of chunk labels (each
created chunk gets a fresh label), a set of usage *events* (each create/append/detach is one;
a merge holds the union of its branches' events, a concat adds one for what it counts twice) and
its parents. Invariants: chunk order and every page of it, usage = the sum of its distinct events
(so shared usage is never double-counted), parents, ancestors and descendants.
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass, field
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import Runtime, Usage
from runtime.sessions import InMemoryHome, InMemorySessionStore, SessionService

USAGE = st.builds(
    lambda p, c: Usage(prompt_tokens=p, completion_tokens=c, total_tokens=p + c), st.integers(0, 50), st.integers(0, 50)
)
PICK = st.integers(0, 10_000)  # an index into the sessions made so far (mod their number)
RECENT = st.integers(-4, -1)  # one of the last few: merges of branches that share more than their root
OPS = st.one_of(
    st.tuples(st.just("create"), st.integers(0, 3), USAGE),
    st.tuples(st.just("append"), PICK, st.integers(0, 3), USAGE),
    st.tuples(st.just("fork"), PICK, st.integers(1, 3)),
    st.tuples(st.just("detach"), PICK),
    st.tuples(
        st.just("merge"), st.lists(PICK, min_size=2, max_size=3), st.sampled_from(["append", "append", "concat"])
    ),
    st.tuples(st.just("merge"), st.lists(RECENT, min_size=3, max_size=3), st.just("append")),
)


@dataclass
class Model:
    chunks: list[str]
    events: dict[str, Usage]
    parents: tuple[str, ...] = ()
    children: list[str] = field(default_factory=list)

    @property
    def usage(self) -> Usage:
        return sum(self.events.values(), Usage())


class World:
    """The model of every session made so far, keyed by the engine's ids."""

    def __init__(self) -> None:
        self.sessions: dict[str, Model] = {}
        self.order: list[str] = []
        self.fresh = itertools.count()

    def label(self) -> str:
        return f"c{next(self.fresh)}"

    def event(self, usage: Usage) -> dict[str, Usage]:
        return {f"e{next(self.fresh)}": usage}

    def add(self, session_id: str, model: Model) -> None:
        self.sessions[session_id] = model
        self.order.append(session_id)
        for parent in model.parents:
            self.sessions[parent].children.append(session_id)

    def pick(self, n: int) -> str:
        return self.order[n % len(self.order)]

    def merged(self, ids: list[str], strategy: str) -> Model:
        branches = [self.sessions[i] for i in ids]
        if strategy == "concat":
            union = {k: v for b in branches for k, v in b.events.items()}
            twice = sum((b.usage for b in branches), Usage()).minus(sum(union.values(), Usage()))
            chunks = [c for b in branches for c in b.chunks]
            return Model(chunks, {**union, **self.event(twice)}, tuple(ids))
        prefix = 0
        while all(len(b.chunks) > prefix for b in branches) and len({b.chunks[prefix] for b in branches}) == 1:
            prefix += 1
        chunks = list(branches[0].chunks)
        for b in branches[1:]:
            held = set(chunks)
            chunks.extend(c for c in b.chunks[prefix:] if c not in held)
        events = {k: v for b in branches for k, v in b.events.items()}
        return Model(chunks, events, tuple(ids))

    def ancestors(self, session_id: str) -> set[str]:
        out: set[str] = set()
        stack = list(self.sessions[session_id].parents)
        while stack:
            node = stack.pop()
            if node not in out:
                out.add(node)
                stack.extend(self.sessions[node].parents)
        return out


async def apply(sessions: SessionService, world: World, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "create" or not world.order:
        labels = [world.label() for _ in range(op[1] if kind == "create" else 1)]
        usage = op[2] if kind == "create" else Usage()
        s = await sessions.create([{"kind": "user", "content": c} for c in labels], usage=usage)
        world.add(s.id, Model(labels, world.event(usage)))
    elif kind == "append":
        base = world.pick(op[1])
        labels = [world.label() for _ in range(op[2])]
        info = await sessions.append(base, [{"kind": "assistant", "content": c} for c in labels], usage=op[3])
        model = world.sessions[base]
        world.add(info.id, Model([*model.chunks, *labels], {**model.events, **world.event(op[3])}, (base,)))
    elif kind == "fork":
        base = world.pick(op[1])
        for f in await sessions.fork(base, count=op[2]):
            world.add(f.id, Model(list(world.sessions[base].chunks), dict(world.sessions[base].events), (base,)))
    elif kind == "detach":
        base = world.pick(op[1])
        d = await sessions.detach(base)
        model = world.sessions[base]
        world.add(d.id, Model(list(model.chunks), world.event(model.usage)))  # a new root: its own history
    else:
        ids = list(dict.fromkeys(world.pick(i) for i in op[1]))
        if len(ids) < 2:
            return
        m = await sessions.merge(ids, strategy=op[2])
        world.add(m.id, world.merged(ids, op[2]))


async def check(sessions: SessionService, world: World, pages: list[tuple[int, int]]) -> None:
    for session_id, model in world.sessions.items():
        info = await sessions.info(session_id)
        chunks = [c.content for c in await sessions.chunks(session_id)]
        assert chunks == model.chunks, session_id
        assert info.length == len(model.chunks)
        assert info.usage == model.usage, (session_id, info.op)
        assert info.parents == model.parents
        for offset, limit in pages:
            page = [c.content for c in await sessions.chunks(session_id, offset=offset, limit=limit)]
            assert page == model.chunks[offset : offset + limit]
        assert set(await sessions.ancestors(session_id)) == world.ancestors(session_id)
        assert set(await sessions.descendants(session_id, depth=1)) == set(model.children)


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
OP_LISTS = st.lists(OPS, min_size=1, max_size=25)
PAGES = st.lists(st.tuples(st.integers(0, 12), st.integers(0, 8)), max_size=3)


async def run_ops(sessions: SessionService, ops: list[tuple[Any, ...]], pages: list[tuple[int, int]]) -> None:
    world = World()
    for op in ops:
        await apply(sessions, world, op)
    await check(sessions, world, pages)


@SETTINGS
@given(ops=OP_LISTS, pages=PAGES)
def test_random_op_sequences_keep_order_usage_and_lineage(
    ops: list[tuple[Any, ...]], pages: list[tuple[int, int]]
) -> None:
    """Over the SQLite store (segments, tip extension, recursive SQL): the real thing."""

    async def run() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            async with Runtime.open(tmp, synchronous="OFF", workers=0) as rt:
                await run_ops(rt.sessions, ops, pages)

    anyio.run(run)


@SETTINGS
@given(ops=OP_LISTS, pages=PAGES)
def test_the_in_memory_store_keeps_the_same_semantics(ops: list[tuple[Any, ...]], pages: list[tuple[int, int]]) -> None:
    """The same model check over the shipped fake: the semantics live in the service, not in SQL."""
    anyio.run(run_ops, SessionService(InMemorySessionStore(InMemoryHome())), ops, pages)
