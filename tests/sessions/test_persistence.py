"""The SQLite store under sessions: restarts, migrations, tenant/project isolation, and real bytes on disk."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from runtime import InvalidInputError, NotFoundError, Runtime, Usage
from runtime.errors import StoreError
from runtime.store.migration import Migration
from runtime.store.sqlite.backend import sqlite_database
from runtime.store.sqlite.database import SQLiteDatabase, apply_migrations, pending_migrations
from runtime.store.sqlite.migrations import ALL_MIGRATIONS

pytestmark = pytest.mark.anyio

FILLER = "x" * 100  # ~100 bytes of content per chunk, so copying a session would show


def user(text: str) -> dict[str, Any]:
    return {"kind": "user", "content": text}


async def db_bytes(rt: Runtime) -> int:
    """The database's logical size (page_count * page_size), WAL content included."""
    pages, size = await sqlite_database(rt.store).read(
        lambda c: (c.execute("PRAGMA page_count").fetchone()[0], c.execute("PRAGMA page_size").fetchone()[0])
    )
    return int(pages) * int(size)


async def rows(rt: Runtime, table: str) -> int:
    return int(await sqlite_database(rt.store).read(lambda c: c.execute(f"SELECT count(*) FROM {table}").fetchone()[0]))


async def test_a_session_and_its_lineage_survive_closing_and_reopening(home: Path) -> None:
    async with Runtime.open(home) as rt:
        root = await rt.sessions.create([user("a")], usage=Usage(total_tokens=4), metadata={"k": "v"})
        f1, f2 = await rt.sessions.fork(root.id, count=2)
        a = await rt.sessions.append(f1.id, [user("b")], usage=Usage(total_tokens=1))
        m = await rt.sessions.merge([a.id, f2.id])
        before = await rt.sessions.get(m.id)
        graph = await rt.sessions.lineage(m.id)
    async with Runtime.open(home) as rt:
        assert await rt.sessions.get(m.id) == before
        assert await rt.sessions.lineage(m.id) == graph
        assert (await rt.sessions.info(root.id)).metadata == {"k": "v"}
        more = await rt.sessions.append(m.id, [user("c")])  # and it keeps working after the restart
        assert [c.content for c in await rt.sessions.chunks(more.id)] == ["a", "b", "c"]


async def test_migrations_are_recorded_once_in_order_and_reopening_applies_none(home: Path) -> None:
    db_file = home / "rath.db"
    assert pending_migrations(db_file, ALL_MIGRATIONS) == [m.name for m in ALL_MIGRATIONS]
    async with Runtime.open(home):
        pass
    assert pending_migrations(db_file, ALL_MIGRATIONS) == []
    conn = sqlite3.connect(db_file)
    first = conn.execute("SELECT name, applied_at FROM schema_migrations ORDER BY applied_at, rowid").fetchall()
    conn.close()
    assert [name for name, _ in first] == [m.name for m in ALL_MIGRATIONS]
    assert {"0001_sessions", "0002_session_own_usage"} <= {name for name, _ in first}
    async with Runtime.open(home) as rt:
        s = await rt.sessions.create([user("still fine")])
    conn = sqlite3.connect(db_file)
    again = conn.execute("SELECT name, applied_at FROM schema_migrations ORDER BY applied_at, rowid").fetchall()
    conn.close()
    assert again == first  # nothing re-applied, nothing re-recorded
    async with Runtime.open(home) as rt:
        assert (await rt.sessions.get(s.id)).chunks[0].content == "still fine"


async def test_tenants_and_projects_never_see_each_others_sessions(home: Path) -> None:
    async with Runtime.open(home, tenant="acme", project="alpha") as acme:
        mine = await acme.sessions.create([user("acme secret")])
        child = await acme.sessions.append(mine.id, [user("more")])
    for tenant, project in (("globex", "alpha"), ("acme", "beta"), ("local", "default")):
        async with Runtime.open(home, tenant=tenant, project=project) as other:
            theirs = await other.sessions.create([user("other")])
            for op in (
                other.sessions.get,
                other.sessions.info,
                other.sessions.chunks,
                other.sessions.detach,
                other.sessions.fork,
                other.sessions.lineage,
                other.sessions.export_jsonl,
            ):
                with pytest.raises(NotFoundError, match=f"in {tenant}/{project}"):
                    await op(mine.id)
            with pytest.raises(NotFoundError):
                await other.sessions.append(mine.id, [user("intrude")])
            with pytest.raises(NotFoundError):
                await other.sessions.merge([theirs.id, mine.id])
            with pytest.raises(NotFoundError):
                await other.sessions.derive([mine.id], [user("x")], op="run")
            page, _ = await other.sessions.page(limit=500)
            assert [s.id for s in page] == [theirs.id]
            assert theirs.tenant == tenant and theirs.project == project
    async with Runtime.open(home, tenant="acme", project="alpha") as acme:
        page, _ = await acme.sessions.page(limit=500)
        assert {s.id for s in page} == {mine.id, child.id}
        assert await acme.sessions.descendants(mine.id) == [child.id]


@pytest.mark.parametrize("tenant", ["", "has space", "semi;colon", "a/b"])
async def test_a_bad_tenant_name_is_refused(home: Path, tenant: str) -> None:
    with pytest.raises(InvalidInputError, match="tenant"):
        async with Runtime.open(home, tenant=tenant):
            pass


async def test_forks_of_a_10000_chunk_session_grow_the_store_by_a_constant(home: Path) -> None:
    async with Runtime.open(home, synchronous="OFF") as rt:
        small = await rt.sessions.create([user(f"{i} {FILLER}") for i in range(10)])
        big = await rt.sessions.create([user(f"{i} {FILLER}") for i in range(10_000)])
        assert await db_bytes(rt) > 1_000_000  # the big session's content really is on disk
        growth: dict[int, float] = {}
        for session in (small, big, small, big):  # twice each: the second pass is the measurement
            chunks, segments = await rows(rt, "chunks"), await rows(rt, "segments")
            start = await db_bytes(rt)
            forks = [f for _ in range(8) for f in await rt.sessions.fork(session.id, count=25)]
            growth[session.length] = (await db_bytes(rt) - start) / len(forks)
            assert await rows(rt, "chunks") == chunks and await rows(rt, "segments") == segments
        # Per fork: about the size of one session row (B-tree page splits make it vary a little),
        # never a copy of the 1.2 MB session, and the same for 10 and 10,000 chunks.
        assert growth[10_000] <= 1024 and growth[10] <= 1024, growth
        assert abs(growth[10_000] - growth[10]) <= max(4 * 4096 / 200, 0.25 * growth[10]), growth
        last = await rt.sessions.chunks(forks[-1].id, offset=9_999)
        assert last[0].content == f"9999 {FILLER}"


async def test_append_to_a_10000_chunk_session_writes_only_the_new_chunk(rt: Runtime) -> None:
    big = await rt.sessions.create([user(str(i)) for i in range(10_000)])
    (fork,) = await rt.sessions.fork(big.id)
    chunks = await rows(rt, "chunks")
    at_tip = await rt.sessions.append(big.id, [user("tip")])
    off_tip = await rt.sessions.append(fork.id, [user("branch")])
    assert await rows(rt, "chunks") == chunks + 2
    assert (await rt.sessions.chunks(at_tip.id, offset=10_000))[0].content == "tip"
    assert (await rt.sessions.chunks(off_tip.id, offset=9_999))[1].content == "branch"


async def test_a_write_that_loses_its_transaction_fails_alone_and_the_store_keeps_working(rt: Runtime) -> None:
    """A write whose transaction SQLite rolled back under it gets a StoreError; later writes commit."""
    with pytest.raises(StoreError, match="the write transaction failed"):
        await sqlite_database(rt.store).write(lambda conn: conn.execute("ROLLBACK"))
    s = await rt.sessions.create([user("after")])
    assert (await rt.sessions.get(s.id)).chunks[0].content == "after"


async def test_a_reader_connection_in_use_while_the_database_closes_is_closed_not_pooled(home: Path) -> None:
    db = SQLiteDatabase(home / "db.sqlite")
    await db.open(ALL_MIGRATIONS)
    started, release = threading.Event(), threading.Event()
    used: list[sqlite3.Connection] = []

    def slow(conn: sqlite3.Connection) -> None:
        used.append(conn)
        started.set()
        release.wait(10)

    async with anyio.create_task_group() as tg:
        tg.start_soon(db.read, slow)
        await anyio.to_thread.run_sync(started.wait, 10)
        await db.close()
        release.set()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        used[0].execute("SELECT 1")


async def test_a_home_made_before_0002_upgrades_and_merges_count_usage_once(home: Path) -> None:
    """A database at 0001 (written as the engine then wrote it) is migrated on open; the own usage
    0002 fills in makes a later merge of two old branches count their common root once."""
    old = sqlite3.connect(home / "rath.db", isolation_level=None)
    apply_migrations(old, [m for m in ALL_MIGRATIONS if m.name == "0001_sessions"])
    rows_0001 = [  # id, op, usage total, parent
        ("ses_0190f3c2a1b4e5f607180001", "create", 10, None),
        ("ses_0190f3c2a1b4e5f607180002", "append", 15, "ses_0190f3c2a1b4e5f607180001"),
        ("ses_0190f3c2a1b4e5f607180003", "append", 13, "ses_0190f3c2a1b4e5f607180001"),
    ]
    for sid, op, total, parent in rows_0001:
        old.execute(
            "INSERT INTO sessions (id, tenant, project, op, segment_id, length, placement, usage, metadata, created_at)"
            " VALUES (?, 'local', 'default', ?, NULL, 0, '{}', ?, '{}', 1.0)",
            (sid, op, Usage(total_tokens=total).model_dump_json()),
        )
        if parent:
            old.execute("INSERT INTO session_parents VALUES (?, 0, ?)", (sid, parent))
    old.close()
    assert "0002_session_own_usage" in pending_migrations(home / "rath.db", ALL_MIGRATIONS)
    async with Runtime.open(home, workers=0) as rt:
        m = await rt.sessions.merge([rows_0001[1][0], rows_0001[2][0]])
        assert m.usage == Usage(total_tokens=10 + 5 + 3)
    assert pending_migrations(home / "rath.db", ALL_MIGRATIONS) == []


async def test_a_cancelled_read_stops_waiting_and_its_connection_stays_usable(home: Path) -> None:
    """The caller is cancelled at once; the reader finishes the function, ends its snapshot, and serves later reads."""
    db = SQLiteDatabase(home / "db.sqlite")
    await db.open(ALL_MIGRATIONS)
    started, release = threading.Event(), threading.Event()

    def slow(conn: sqlite3.Connection) -> int:
        started.set()
        release.wait(10)
        return int(conn.execute("SELECT 1").fetchone()[0])

    try:
        with anyio.move_on_after(5) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(db.read, slow)
                await anyio.to_thread.run_sync(started.wait, 10)
                tg.cancel_scope.cancel()
        assert not scope.cancelled_caught  # the cancel did not wait for the read
        release.set()
        results: list[int] = []

        async def count_sessions() -> None:
            results.append(await db.read(lambda c: int(c.execute("SELECT count(*) FROM sessions").fetchone()[0])))

        async with anyio.create_task_group() as tg:  # more reads at once than there are reader threads
            for _ in range(10):
                tg.start_soon(count_sessions)
        assert results == [0] * 10
    finally:
        release.set()
        await db.close()


async def test_an_error_in_a_read_reaches_the_caller_and_reads_go_on(rt: Runtime) -> None:
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        await sqlite_database(rt.store).read(lambda c: c.execute("SELECT * FROM no_such_table").fetchall())
    assert await rows(rt, "sessions") == 0


async def test_reads_and_writes_after_close_fail_clearly(home: Path) -> None:
    db = SQLiteDatabase(home / "db.sqlite")
    await db.open(ALL_MIGRATIONS)
    await db.close()
    with pytest.raises(StoreError, match="the database is closed"):
        await db.read(lambda c: c.execute("SELECT 1").fetchone())
    with pytest.raises(StoreError, match="the database is closed"):
        await db.write(lambda c: c.execute("SELECT 1").fetchone())
    with pytest.raises(StoreError, match="the database is closed"):
        await db.lookup(lambda c: c.execute("SELECT 1").fetchone())


async def test_a_lookup_runs_on_the_event_loop_and_moves_to_a_reader_when_the_file_is_locked(rt: Runtime) -> None:
    """Point reads run in place; a lookup that finds the file locked (SQLITE_BUSY) is retried on a
    reader thread, whose connection waits for the lock instead of the event loop."""
    threads: list[str] = []

    def read(conn: sqlite3.Connection) -> int:
        threads.append(threading.current_thread().name)
        if len(threads) == 1:
            busy = sqlite3.OperationalError("database is locked")
            busy.sqlite_errorcode = sqlite3.SQLITE_BUSY
            raise busy
        return int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])

    assert await sqlite_database(rt.store).lookup(read) == 0
    assert threads[0] == threading.main_thread().name and threads[1].startswith("rath-sqlite-reader")
    with pytest.raises(sqlite3.OperationalError, match="no such table"):  # other errors are the caller's
        await sqlite_database(rt.store).lookup(lambda c: c.execute("SELECT * FROM no_such_table").fetchall())
    s = await rt.sessions.create([user("x")])
    count = await sqlite_database(rt.store).lookup(lambda c: c.execute("SELECT count(*) FROM sessions").fetchone()[0])
    assert count == 1
    assert (await rt.sessions.window(s.id, 0, 10))[1][0].content == "x"


async def test_a_small_page_is_read_in_place_and_a_large_one_or_a_whole_session_on_a_reader(rt: Runtime) -> None:
    s = await rt.sessions.create([user(str(i)) for i in range(3)])
    threads: list[str] = []
    real_lookup, real_read = sqlite_database(rt.store).lookup, sqlite_database(rt.store).read
    mine = asyncio.current_task()  # the runtime's own tasks (indexer, ticker, worker) read the store too

    async def lookup(fn: Any) -> Any:
        if asyncio.current_task() is mine:
            threads.append("lookup")
        return await real_lookup(fn)

    async def read(fn: Any) -> Any:
        if asyncio.current_task() is mine:
            threads.append("read")
        return await real_read(fn)

    sqlite_database(rt.store).lookup, sqlite_database(rt.store).read = lookup, read  # type: ignore[method-assign]
    assert len((await rt.sessions.window(s.id, 0, 100))[1]) == 3
    assert threads == ["lookup"]  # and lookup read it in place: no read() after it
    assert len((await rt.sessions.window(s.id, 0, 101))[1]) == 3
    assert len((await rt.sessions.get(s.id)).chunks) == 3
    assert threads == ["lookup", "read", "read"]
    big = await rt.sessions.create([user("x" * 200_000), user("\x00" + "y" * 100_000)])  # a NUL counts too
    threads.clear()
    page = (await rt.sessions.window(big.id, 0, 2))[1]
    assert [len(c.content) for c in page] == [200_000, 100_001]
    assert threads == ["lookup", "read"]  # over 256k characters: lookup handed it to a reader thread
    grown = await rt.sessions.append((await rt.sessions.fork(s.id))[0].id, [user("z" * 300_000)])
    threads.clear()
    assert [c.content for c in (await rt.sessions.window(grown.id, 0, 3))[1]] == ["0", "1", "2"]
    assert threads == ["lookup", "read"]  # a small page of a large session: the session's size decides
    deep = s
    for i in range(17):  # the fork's append finds the tip taken, so it starts a new segment
        branch = (await rt.sessions.fork(deep.id))[0]
        await rt.sessions.append(deep.id, [user("takes the tip")])
        deep = await rt.sessions.append(branch.id, [user(f"d{i}")])
    threads.clear()
    assert len((await rt.sessions.window(deep.id, 0, 5))[1]) == 5
    assert threads == ["lookup", "read"]  # more than 16 segments to walk


def insert(value: str, hold: Hold | None = None) -> Callable[[sqlite3.Connection], str]:
    """A write of ``value`` into table ``t``; with ``hold``, it holds the writer thread until released."""

    def write(conn: sqlite3.Connection) -> str:
        if hold is not None:
            hold.started.set()
            assert hold.release.wait(30), "the test never released the writer"
        conn.execute("INSERT INTO t (v) VALUES (?)", (value,))
        return value

    return write


class Hold:
    """Events that order a test against the writer thread (instead of sleeps that hope for an order)."""

    def __init__(self) -> None:
        self.started, self.release = threading.Event(), threading.Event()

    async def running(self) -> None:
        """Return once the held write is running on the writer thread."""
        await anyio.to_thread.run_sync(self.started.wait)


async def queued(db: SQLiteDatabase, count: int) -> None:
    """Return once ``count`` writes are queued behind the batch in progress (each parked on its event)."""
    while len(db._pending) < count:
        await anyio.lowlevel.checkpoint()


async def test_batch_leaders_cancelled_by_plain_asyncio_still_settle_every_write(home: Path) -> None:
    """asyncio's own cancel (wait_for, loop shutdown) gets past anyio's shield: a cancelled leader
    still waits for its batch (its write is committed), a writer cancelled before its write was
    taken withdraws it, and the writer behind them is not left spinning."""
    import asyncio

    db = SQLiteDatabase(home / "db.sqlite")
    await db.open([Migration("t", "CREATE TABLE t (v TEXT);")])
    try:
        hold = Hold()
        first = asyncio.ensure_future(db.write(insert("a", hold)))
        await hold.running()
        second, third = asyncio.ensure_future(db.write(insert("b"))), asyncio.ensure_future(db.write(insert("c")))
        await queued(db, 2)
        first.cancel()  # its batch keeps running on the writer thread
        await asyncio.sleep(0)
        second.cancel()  # withdrawn before any batch took it
        await asyncio.sleep(0)
        hold.release.set()
        await asyncio.wait_for(asyncio.shield(third), 30)
        assert first.cancelled() and second.cancelled()
        assert sorted(await db.read(lambda c: [r[0] for r in c.execute("SELECT v FROM t")])) == ["a", "c"]
    finally:
        await db.close()


async def test_a_lookup_connection_left_inside_a_read_recovers(rt: Runtime) -> None:
    s = await rt.sessions.create([user("x")])
    assert sqlite_database(rt.store)._here is not None
    sqlite_database(rt.store)._here.execute(
        "BEGIN"
    )  # as if an interrupt had landed between a lookup's read and its ROLLBACK
    assert (await rt.sessions.info(s.id)).length == 1


async def test_a_leader_cancelled_before_its_batch_runs_hands_the_other_writes_back(home: Path) -> None:
    """A leader torn down (plain asyncio cancel) while queueing for the writer wrote nothing: its own
    write is withdrawn and the writes it carried go to the next leader, not to an error."""
    import asyncio

    db = SQLiteDatabase(home / "db.sqlite")
    await db.open([Migration("t", "CREATE TABLE t (v TEXT);")])
    try:
        hold = Hold()
        first = asyncio.ensure_future(db.write(insert("a", hold)))
        await hold.running()
        second, third = asyncio.ensure_future(db.write(insert("b"))), asyncio.ensure_future(db.write(insert("c")))
        await queued(db, 2)
        hold.release.set()
        await first
        second.cancel()  # it now leads [second, third] and is queueing for the writer
        results = await asyncio.gather(second, third, return_exceptions=True)
        assert isinstance(results[0], asyncio.CancelledError) and results[1] == "c"
        assert sorted(await db.read(lambda c: [r[0] for r in c.execute("SELECT v FROM t")])) == ["a", "c"]
    finally:
        await db.close()
