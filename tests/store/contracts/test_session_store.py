"""The ``SessionStore`` contract, run on every backend and on the in-memory store.

Sessions are written as ``NewSession`` records (what the engine asks of a store), read back by
the protocol alone: appends extend a base without changing it, forks share chunks, writes are
all or none, lineage and ancestry stay within their tenant/project, ids are searched newest first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest

from runtime.errors import ConflictError, NotFoundError
from runtime.sessions import InMemoryHome, InMemorySessionStore, SessionService
from runtime.sessions.model import Chunk, LineageNode, Placement, SessionInfo, Usage
from runtime.sessions.store import NewSession, SessionStore, StoredChunk
from runtime.store.core.sessions import CoreSessionStore
from runtime.store.postgres.executor import PostgresExecutor
from runtime.store.postgres.schema import SESSIONS
from tests.store.contracts.conftest import BACKENDS, open_postgres, open_test_backend, postgres_dsn

pytestmark = pytest.mark.anyio
Stores = Callable[[str], SessionStore]  # a store of the same home for a project


@pytest.fixture(params=[*BACKENDS, "in-memory"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def dsn(kind: str, request: pytest.FixtureRequest) -> str | None:
    return postgres_dsn(request) if kind == "postgresql" else None


@pytest.fixture
async def stores(kind: str, dsn: str | None, tmp_path: Path) -> AsyncIterator[Stores]:
    if kind == "in-memory":
        home = InMemoryHome()
        yield lambda project: InMemorySessionStore(home, "local", project)
        return
    if dsn is not None:
        async with open_postgres(dsn, SESSIONS) as db:
            yield lambda project: CoreSessionStore(PostgresExecutor(db), "local", project)
        return
    async with open_test_backend(kind, tmp_path) as backend:
        yield lambda project: backend.sessions("local", project)


@pytest.fixture
def store(stores: Stores) -> SessionStore:
    return stores("default")


def chunks(*texts: str) -> tuple[StoredChunk, ...]:
    return tuple(StoredChunk(f"uid-{t}", Chunk(kind="user", content=t)) for t in texts)


def new(
    *texts: str, base_of: str | None = None, op: Any = "create", parents: tuple[str, ...] = (), **kw: Any
) -> NewSession:
    fields: dict[str, Any] = {"placement": Placement(), "usage": Usage(), "metadata": {}} | kw
    return NewSession(op=op, parents=parents, chunks=chunks(*texts), base_of=base_of, **fields)


async def texts(store: SessionStore, session_id: str, offset: int = 0, limit: int | None = None) -> list[str]:
    return [sc.chunk.content for sc in await store.chunks(session_id, offset, limit)]


async def test_a_session_reads_back_as_written_and_only_in_its_scope(stores: Stores, store: SessionStore) -> None:
    (root,) = await store.insert([new("a", "b", metadata={"k": 1}, usage=Usage(prompt_tokens=3))])
    assert root.length == 2 and root.op == "create" and root.parents == () and root.metadata == {"k": 1}
    info = await store.info(root.id)
    assert info == root and info.usage.prompt_tokens == 3
    assert await texts(store, root.id) == ["a", "b"]
    assert await store.uids(root.id) == ["uid-a", "uid-b"]
    snap_info, snap_chunks = await store.snapshot(root.id, 1, 5)
    assert snap_info == root and [sc.chunk.content for sc in snap_chunks] == ["b"]
    with pytest.raises(NotFoundError, match="session_list"):
        await store.info("ses_nope")
    with pytest.raises(NotFoundError):
        await store.uids("ses_nope")
    other = stores("other")
    for read in (other.info, other.chunks, other.uids, other.snapshot):
        with pytest.raises(NotFoundError):
            await read(root.id)


async def test_appends_extend_a_base_that_stays_as_it_was_and_branches_keep_their_own_chunks(
    store: SessionStore,
) -> None:
    (root,) = await store.insert([new("a", "b")])
    (one,) = await store.insert_on(root.id, lambda base: [new("c", base_of=base.id, op="append", parents=(base.id,))])
    (two,) = await store.insert_on(root.id, lambda base: [new("x", "y", base_of=base.id, op="append")])
    (deeper,) = await store.insert_on(one.id, lambda base: [new("d", base_of=base.id, op="append")])
    assert await texts(store, root.id) == ["a", "b"]
    assert await texts(store, one.id) == ["a", "b", "c"] and one.length == 3 and one.parents == (root.id,)
    assert await texts(store, two.id) == ["a", "b", "x", "y"]
    assert await texts(store, deeper.id) == ["a", "b", "c", "d"]
    assert await texts(store, deeper.id, 1, 2) == ["b", "c"] and await texts(store, deeper.id, 3) == ["d"]
    assert await texts(store, deeper.id, 9) == []


async def test_a_fork_shares_its_bases_chunks_and_a_failing_build_writes_nothing(store: SessionStore) -> None:
    (root,) = await store.insert([new("a", "b", metadata={"m": True})])
    forks = await store.insert_on(
        root.id,
        lambda base: [
            new(base_of=base.id, op="fork", parents=(base.id,), metadata=dict(base.metadata)) for _ in range(3)
        ],
    )
    assert len({f.id for f in forks}) == 3
    for fork in forks:
        assert fork.length == 2 and fork.metadata == {"m": True} and await texts(store, fork.id) == ["a", "b"]
        assert await store.uids(fork.id) == await store.uids(root.id)
    before = await store.page(None, 100)

    def broken(base: SessionInfo) -> list[NewSession]:
        raise ValueError("no")

    with pytest.raises(ValueError):
        await store.insert_on(root.id, broken)
    with pytest.raises(NotFoundError):
        await store.insert_on("ses_nope", lambda base: [new("z", base_of=base.id)])
    assert await store.page(None, 100) == before


async def test_a_write_of_several_sessions_is_all_or_none(store: SessionStore) -> None:
    (root,) = await store.insert([new("a")])
    before = await store.page(None, 100)
    with pytest.raises(NotFoundError):
        await store.insert([new("fine", base_of=root.id), new("broken", base_of="ses_nope")])
    assert await store.page(None, 100) == before


async def test_lineage_walks_up_and_down_within_bounds_and_marks_imported_stubs(
    stores: Stores, store: SessionStore
) -> None:
    stub = LineageNode(id="ses_elsewhere", op="create", length=1, created_at=1.0, stub=True)
    (root,) = await store.insert([new("a", id="ses_imported", op="import", parents=("ses_elsewhere",))], [(stub, ())])
    (child,) = await store.insert_on(root.id, lambda b: [new("b", base_of=b.id, op="append", parents=(b.id,))])
    (grand,) = await store.insert_on(child.id, lambda b: [new("c", base_of=b.id, op="append", parents=(b.id,))])
    nodes, edges, cut = await store.lineage(child.id, 10, up=True, down=True, max_nodes=100)
    assert {n.id for n in nodes} == {"ses_elsewhere", root.id, child.id, grand.id} and not cut
    assert {(e.parent, e.child) for e in edges} == {
        ("ses_elsewhere", root.id),
        (root.id, child.id),
        (child.id, grand.id),
    }
    assert next(n for n in nodes if n.id == "ses_elsewhere").stub
    up, _, _ = await store.lineage(child.id, 1, up=True, down=False, max_nodes=100)
    assert {n.id for n in up} == {root.id, child.id}
    down, _, _ = await store.lineage(child.id, 5, up=False, down=True, max_nodes=100)
    assert {n.id for n in down} == {child.id, grand.id}
    few, _, cut = await store.lineage(grand.id, 10, up=True, down=False, max_nodes=2)
    assert len(few) == 2 and cut
    with pytest.raises(NotFoundError):
        await store.info("ses_elsewhere")  # a stub is lineage only
    with pytest.raises(ConflictError, match="already used"):
        await stores("other").insert([new("z", id="ses_imported", op="import")])
    with pytest.raises(NotFoundError):
        await stores("other").lineage(child.id, 1, up=True, down=True, max_nodes=10)


async def test_ancestry_gives_each_session_of_a_history_once_with_its_own_usage(store: SessionStore) -> None:
    (root,) = await store.insert([new("a", usage=Usage(prompt_tokens=5))])
    (a,) = await store.insert_on(
        root.id, lambda b: [new("b", base_of=b.id, parents=(b.id,), own_usage=Usage(prompt_tokens=1))]
    )
    (b,) = await store.insert_on(
        root.id, lambda b: [new("c", base_of=b.id, parents=(b.id,), own_usage=Usage(prompt_tokens=2))]
    )
    found = await store.ancestry([a.id, b.id])
    assert {k: v.prompt_tokens for k, v in found.items()} == {root.id: 5, a.id: 1, b.id: 2}


async def test_merge_on_the_store_keeps_the_shared_prefix_once(store: SessionStore) -> None:
    sessions = SessionService(store)
    base = await sessions.create([{"kind": "user", "content": "q"}])
    left = await sessions.append(base.id, [{"kind": "assistant", "content": "l"}])
    right = await sessions.append(base.id, [{"kind": "assistant", "content": "r"}])
    merged = await sessions.merge([left.id, right.id])
    assert [c.content for c in (await sessions.get(merged.id)).chunks] == ["q", "l", "r"]
    assert merged.parents == (left.id, right.id)
    assert set(await sessions.ancestors(merged.id)) >= {left.id, right.id, base.id}


async def test_pages_and_id_search_are_newest_first_and_scoped(stores: Stores, store: SessionStore) -> None:
    made = []
    for i in range(4):  # one after another: ids sort in that order (runtime/ids.py), in one millisecond too
        made.append((await store.insert([new(str(i))]))[0].id)
    (foreign,) = await stores("other").insert([new("x")])
    assert [s.id for s in await store.page(None, 10)] == made[::-1]
    assert [s.id for s in await store.page(made[2], 10)] == made[1::-1]
    assert await store.ids("", 10) == made[::-1] and foreign.id not in await store.ids("", 10)
    assert await store.ids(made[1], 10) == [made[1]]
    assert await store.ids("ses_", 2) == made[:1:-1]


TABLES = ("sessions", "session_parents", "segments", "chunks")


async def count_rows(kind: str, dsn: str | None, tmp_path: Path) -> dict[str, int]:
    """Rows per session table, read beside the store (the protocol has no such question)."""
    if dsn is not None:
        conn = await asyncpg.connect(dsn)
        try:
            return {t: int(await conn.fetchval(f"SELECT count(*) FROM {t}")) for t in TABLES}
        finally:
            await conn.close()
    with closing(sqlite3.connect(tmp_path / "contract.db")) as conn:
        return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in TABLES}


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_fork_writes_the_same_rows_whatever_its_history_and_an_append_at_a_tip_extends_in_place(
    kind: str, dsn: str | None, tmp_path: Path, store: SessionStore
) -> None:
    async def grown(session_id: str, n: int) -> str:
        for i in range(n):
            (s,) = await store.insert_on(session_id, partial(lambda text, b: [new(text, base_of=b.id)], f"g{i}"))
            session_id = s.id
        return session_id

    (short,) = await store.insert([new("s")])
    (long,) = await store.insert([new(*(f"l{i}" for i in range(300)))])
    long_id = await grown(long.id, 20)  # a history of 21 writes, in place at the tip: still one segment
    after_growth = await count_rows(kind, dsn, tmp_path)
    assert after_growth["segments"] == 2 and after_growth["chunks"] == 1 + 300 + 20

    deltas = []
    for base in (short.id, long_id):
        before = await count_rows(kind, dsn, tmp_path)
        (fork,) = await store.insert_on(base, lambda b: [new(base_of=b.id, op="fork", parents=(b.id,))])
        after = await count_rows(kind, dsn, tmp_path)
        deltas.append({t: after[t] - before[t] for t in TABLES})
        assert await store.uids(fork.id) == await store.uids(base)
    assert deltas[0] == deltas[1] == {"sessions": 1, "session_parents": 1, "segments": 0, "chunks": 0}

    # The fork's first append starts a segment of its own; the base's next append still extends in place.
    before = await count_rows(kind, dsn, tmp_path)
    (f2,) = await store.insert_on(fork.id, lambda b: [new("f", base_of=b.id)])
    (b2,) = await store.insert_on(long_id, lambda b: [new("b", base_of=b.id)])
    after = await count_rows(kind, dsn, tmp_path)
    assert after["segments"] - before["segments"] == 1 and after["chunks"] - before["chunks"] == 2
    assert (await texts(store, f2.id))[-2:] == ["g19", "f"]
    assert (await texts(store, b2.id))[-2:] == ["g19", "b"] and b2.length == 321


async def test_concurrent_appends_on_one_base_each_keep_their_own_chunks(store: SessionStore) -> None:
    (root,) = await store.insert([new("a")])
    made: dict[int, SessionInfo] = {}

    async def append(i: int) -> None:
        (made[i],) = await store.insert_on(root.id, lambda b: [new(f"x{i}", f"y{i}", base_of=b.id)])

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(append, i)
    for i, info in made.items():
        assert await texts(store, info.id) == ["a", f"x{i}", f"y{i}"] and info.length == 3
    assert await texts(store, root.id) == ["a"]
