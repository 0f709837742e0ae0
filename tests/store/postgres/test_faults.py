"""Faults on the real server: terminated backends, a server that goes away and comes back, a
connection lost exactly before or exactly after COMMIT (through tests/store/postgres/proxy.py)."""

from __future__ import annotations

import anyio
import asyncpg
import pytest

from runtime.errors import StoreError
from runtime.store.postgres import PostgresDatabase
from runtime.store.postgres.faults import AmbiguousCommitError
from tests.store.postgres.proxy import Proxy

pytestmark = pytest.mark.anyio


async def _setup(db: PostgresDatabase) -> None:
    async def create(conn: asyncpg.Connection) -> None:
        await conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER NOT NULL DEFAULT 1)")

    await db.write(create)


def _insert(k: str):  # type: ignore[no-untyped-def]
    async def fn(conn: asyncpg.Connection) -> str:
        await conn.execute("INSERT INTO t (k) VALUES ($1)", k)
        return k

    return fn


async def _keys(db: PostgresDatabase) -> list[str]:
    async def fn(conn: asyncpg.Connection) -> list[str]:
        return [r[0] for r in await conn.fetch("SELECT k FROM t ORDER BY k")]

    return await db.read(fn)


async def _terminate(pg_url: str, pids: list[int]) -> None:
    admin = await asyncpg.connect(pg_url)
    try:
        for pid in pids:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()


async def test_backend_terminated_mid_write_reruns_it_once_on_a_new_connection(
    db: PostgresDatabase, pg_url: str
) -> None:
    await _setup(db)
    attempts: list[int] = []

    async def killed_midway(conn: asyncpg.Connection) -> str:
        await conn.execute("INSERT INTO t (k) VALUES ('once')")
        attempts.append(conn.get_server_pid())
        if len(attempts) == 1:
            await _terminate(pg_url, [conn.get_server_pid()])
        await conn.execute("UPDATE t SET n = n + 1 WHERE k = 'once'")
        return "done"

    assert await db.write(killed_midway) == "done"
    assert len(attempts) == 2 and attempts[0] != attempts[1]
    assert await _keys(db) == ["once"]
    assert db.stats["reruns"] == 1


async def test_every_pooled_connection_terminated_then_the_next_calls_work(db: PostgresDatabase, pg_url: str) -> None:
    await _setup(db)
    await db.write(_insert("before"))

    async def pids(conn: asyncpg.Connection) -> list[int]:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'rath-mcp'"
        )
        return [r[0] for r in rows]

    await _terminate(pg_url, await db.read(pids))
    await db.write(_insert("after"))
    assert await _keys(db) == ["after", "before"]


async def test_a_read_whose_backend_is_terminated_is_run_again(db: PostgresDatabase, pg_url: str) -> None:
    await _setup(db)
    await db.write(_insert("a"))
    killed: list[int] = []

    async def fn(conn: asyncpg.Connection) -> int:
        if not killed:
            killed.append(conn.get_server_pid())
            await _terminate(pg_url, killed)
        return int(await conn.fetchval("SELECT count(*) FROM t"))

    assert await db.read(fn) == 1


async def test_a_closed_port_gets_a_clear_error_at_once() -> None:
    with anyio.fail_after(10):  # a safety net: refused connections fail at once
        db = PostgresDatabase("postgresql://postgres@127.0.0.1:9/none")
        with pytest.raises(StoreError, match=r"127\.0\.0\.1:9/none is unreachable .*server is running"):
            await db.open()


async def test_a_server_that_goes_away_errors_clearly_then_comes_back(proxy: Proxy, pg_url: str) -> None:
    db = PostgresDatabase(proxy.in_front_of(pg_url), max_size=3)
    await db.open()
    try:
        await _setup(db)
        await db.write(_insert("up"))
        await proxy.refuse()  # the server goes down: every connection dropped, new ones refused
        with anyio.fail_after(10):
            with pytest.raises(StoreError, match="is unreachable"):
                await db.write(_insert("down"))
            with pytest.raises(StoreError, match="is unreachable"):
                await _keys(db)
        await proxy.accept()  # it is back (on the same port)
        await db.write(_insert("again"))
        assert await _keys(db) == ["again", "up"]
    finally:
        await db.close()


async def test_connection_lost_before_commit_reached_the_server_is_rerun(proxy: Proxy, pg_url: str) -> None:
    db = PostgresDatabase(proxy.in_front_of(pg_url), max_size=3)
    await db.open()
    try:
        await _setup(db)
        proxy.mode = "cut_before_commit"
        assert await db.write(_insert("k")) == "k"
        assert proxy.cuts == 1
        assert await _keys(db) == ["k"]
        assert db.stats["reruns"] == 1
    finally:
        await db.close()


async def test_connection_lost_after_the_server_committed_is_resolved_as_committed(proxy: Proxy, pg_url: str) -> None:
    """The server committed but its answer never arrived: the database asks it (pg_xact_status)
    instead of guessing, so the write succeeds once and is not run again (that would fail here:
    a second INSERT of the same key is a unique violation)."""
    db = PostgresDatabase(proxy.in_front_of(pg_url), max_size=3)
    await db.open()
    try:
        await _setup(db)
        proxy.mode = "cut_after_commit"
        assert await db.write(_insert("k")) == "k"
        assert proxy.cuts == 1
        assert db.stats["resolved"] == 1 and db.stats["reruns"] == 0
        assert await _keys(db) == ["k"]
    finally:
        await db.close()


async def test_a_commit_whose_outcome_cannot_be_learned_is_reported_as_ambiguous(proxy: Proxy, pg_url: str) -> None:
    db = PostgresDatabase(proxy.in_front_of(pg_url), max_size=3, resolve_window=0.5)
    await db.open()
    try:
        await _setup(db)
        proxy.mode, proxy.refuse_after_cut = "cut_after_commit", True
        with pytest.raises(AmbiguousCommitError, match="could not be asked whether the commit happened"):
            await db.write(_insert("k"))
        await proxy.accept()
        assert await _keys(db) == ["k"]  # it had in fact committed
    finally:
        await db.close()
