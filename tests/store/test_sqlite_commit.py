"""Where ``SQLiteDatabase`` commits a write: a lone small one on the event loop's thread, everything else
(and anything that would wait) on the writer's thread, group-committed (runtime/store/sqlite/commit.py)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from runtime.store.migration import Migration
from runtime.store.sqlite.commit import CHECKPOINT_ROWS, LOOP_PASS_S, InlineGate
from runtime.store.sqlite.database import SQLiteDatabase

pytestmark = pytest.mark.anyio
TABLE = [Migration("0001_t", "CREATE TABLE t (x INTEGER)")]


class Clock:
    """The gate's clock, moved by hand (commits cost what a test says, nothing unless it says so), or by
    ``tick`` at every reading (time passes as the database works, the same on every machine)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.tick = 0.0

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def db(tmp_path: Path, clock: Clock) -> AsyncIterator[SQLiteDatabase]:
    db = SQLiteDatabase(tmp_path / "commit.db")
    db._gate = InlineGate(clock=clock)  # where a write commits never hangs on how long commits took here
    await db.open(TABLE)
    try:
        yield db
    finally:
        await db.close()


def insert(x: int) -> Callable[[sqlite3.Connection], int]:
    def write(conn: sqlite3.Connection) -> int:
        conn.execute("INSERT INTO t (x) VALUES (?)", (x,))
        return threading.get_ident()

    return write


async def values(db: SQLiteDatabase) -> list[int]:
    return await db.read(lambda conn: [row[0] for row in conn.execute("SELECT x FROM t ORDER BY x")])


async def until(done: Callable[[], bool]) -> None:
    while not done():
        await anyio.lowlevel.checkpoint()


async def test_a_lone_small_write_commits_on_the_loops_thread_and_any_other_on_the_writers(db: SQLiteDatabase) -> None:
    here = threading.get_ident()
    assert await db.write(insert(1), small=True) == here
    assert await db.write(insert(2)) != here  # not small: the writer's thread
    assert await db.write(insert(3), small=True) == here  # this task wrote last: still alone
    assert await values(db) == [1, 2, 3]


async def test_a_small_write_after_another_live_tasks_write_goes_to_the_writers_thread(db: SQLiteDatabase) -> None:
    here, wrote, finish = threading.get_ident(), anyio.Event(), anyio.Event()

    async def other_writer() -> None:  # a task that wrote and is still at work (it may write again soon)
        await db.write(insert(1), small=True)
        wrote.set()
        await finish.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(other_writer)
        await wrote.wait()
        assert await db.write(insert(2), small=True) != here
        finish.set()
    assert await db.write(insert(3), small=True) == here  # the last writer has ended


async def test_writers_that_overlap_share_commits_small_or_not(db: SQLiteDatabase, clock: Clock) -> None:
    clock.tick = LOOP_PASS_S / 2  # a commit here costs half a pass interval: the loop gets a pass after each
    commits: list[str] = []
    assert db._writer_conn is not None
    db._writer_conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    async with anyio.create_task_group() as tg:
        for task in range(8):
            for i in range(3):
                tg.start_soon(partial(db.write, insert(task * 10 + i), small=True))
    assert sorted(await values(db)) == sorted(t * 10 + i for t in range(8) for i in range(3))
    assert len(commits) < 24  # writes made while others were under way joined their batches


async def test_a_small_write_never_holds_the_loop_while_another_process_has_the_write_lock(
    db: SQLiteDatabase, tmp_path: Path
) -> None:
    other = sqlite3.connect(tmp_path / "commit.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process writing, for as long as it likes
        written = anyio.Event()

        async def write() -> None:
            await db.write(insert(7), small=True)
            written.set()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                await until(lambda: db._batch is not None)  # queued for the writer's thread, which waits
                assert not written.is_set()  # and this loop runs meanwhile
                other.execute("COMMIT")
                await written.wait()
        assert await values(db) == [7]
    finally:
        other.close()


async def test_a_small_write_that_fails_on_the_loop_rolls_back_alone(db: SQLiteDatabase) -> None:
    def half(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (x) VALUES (1)")
        raise ValueError("not this one")

    with pytest.raises(ValueError, match="not this one"):
        await db.write(half, small=True)
    assert await db.write(insert(2), small=True) == threading.get_ident()
    assert await values(db) == [2]


async def test_when_a_wal_checkpoint_is_due_the_next_write_goes_to_the_writers_thread(db: SQLiteDatabase) -> None:
    here = threading.get_ident()

    def many(conn: sqlite3.Connection) -> int:
        conn.executemany("INSERT INTO t VALUES (?)", [(x,) for x in range(CHECKPOINT_ROWS)])
        return threading.get_ident()

    assert await db.write(many, small=True) == here  # committed here, which never checkpoints
    assert await db.write(insert(-1), small=True) != here  # there, it checkpoints the WAL after its commit
    assert await db.write(insert(-2), small=True) == here
    assert len(await values(db)) == CHECKPOINT_ROWS + 2


async def test_a_task_committing_here_gives_the_loop_a_pass_once_it_went_long_enough_without_one(
    db: SQLiteDatabase, clock: Clock
) -> None:
    here, ran = threading.get_ident(), anyio.Event()

    async def bystander() -> None:
        ran.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(bystander)  # ready: it runs at the loop's next pass
        assert await db.write(insert(1), small=True) == here
        assert await db.write(insert(2), small=True) == here
        assert not ran.is_set()  # no pass given: the loop has not gone LOOP_PASS_S without one
        clock.now += LOOP_PASS_S
        assert await db.write(insert(3), small=True) == here
        assert ran.is_set()
        clock.now += LOOP_PASS_S / 2
        assert not db._gate.pass_due()  # counted from the pass just given
    assert await values(db) == [1, 2, 3]


async def test_once_commits_turn_costly_lone_writes_go_to_the_writers_thread(db: SQLiteDatabase, clock: Clock) -> None:
    here = threading.get_ident()

    def slow(conn: sqlite3.Connection) -> int:
        conn.execute("INSERT INTO t (x) VALUES (0)")
        clock.now += 1.0  # this commit took a second, by the gate's clock: a disk whose fsync crawls
        return threading.get_ident()

    assert await db.write(slow, small=True) == here
    assert await db.write(insert(1), small=True) != here  # the hop now costs little beside a commit
    assert await values(db) == [0, 1]
