"""LISTEN/NOTIFY wake-ups on the real server: across processes, on commit only, through reconnects."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.lowlevel
import asyncpg
import pytest

from runtime.errors import StoreError
from runtime.store.postgres import PostgresDatabase
from runtime.store.postgres.notify import Notification, Notifier, Subscription, notify

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
async def notifier(pg_url: str) -> AsyncIterator[Notifier]:
    n = Notifier(pg_url)
    async with anyio.create_task_group() as tg:
        await tg.start(n.run)
        assert n.server_pid is not None, "the notifier's first connection attempt failed"
        yield n
        n.close()


def _send(channel: str, payload: str, *, fail: bool = False):  # type: ignore[no-untyped-def]
    async def fn(conn: asyncpg.Connection) -> None:
        await notify(conn, channel, payload)
        if fail:
            raise ValueError("rolled back")

    return fn


async def _payloads(sub: Subscription, n: int = 1) -> list[str]:
    """The payloads arrived on ``sub`` once there are ``n`` (reconnect markers, payload None, left out)."""
    got: list[str] = []
    with anyio.fail_after(20):  # a safety net: delivery takes milliseconds
        while len(got) < n:
            got += [note.payload for note in await sub.wait() if note.payload is not None]
    return got


async def test_a_committed_notification_reaches_a_subscriber_and_a_rolled_back_one_does_not(
    db: PostgresDatabase, notifier: Notifier
) -> None:
    async with notifier.subscribe("runs") as sub:
        with pytest.raises(ValueError):
            await db.write(_send("runs", "never", fail=True))
        await db.write(_send("runs", "run_1"))
        assert await _payloads(sub) == ["run_1"]  # "never" would have come first: same channel, commit order


async def test_in_a_batch_only_the_failing_writes_notification_is_dropped(pg_url: str, notifier: Notifier) -> None:
    db = PostgresDatabase(pg_url, max_size=2, write_lanes=1)
    await db.open()
    try:
        release = anyio.Event()
        holding = anyio.Event()

        async def hold(conn: asyncpg.Connection) -> None:
            holding.set()
            await release.wait()

        async with notifier.subscribe("c") as sub:
            async with anyio.create_task_group() as tg:
                tg.start_soon(db.write, hold)
                await holding.wait()
                results: list[str] = []

                async def send(payload: str, fail: bool) -> None:
                    try:
                        await db.write(_send("c", payload, fail=fail))
                        results.append(payload)
                    except ValueError:
                        results.append("failed " + payload)

                for i in range(5):
                    tg.start_soon(send, f"p{i}", i == 2)
                while len(db._pending) < 5:
                    await anyio.lowlevel.checkpoint()
                release.set()
            assert sorted(await _payloads(sub, 4)) == ["p0", "p1", "p3", "p4"]
            assert sorted(results) == ["failed p2", "p0", "p1", "p3", "p4"]
            assert db.stats["batches"] == 2
    finally:
        await db.close()


async def test_a_wait_times_out_empty_which_is_the_polling_fallback(notifier: Notifier) -> None:
    async with notifier.subscribe("quiet") as sub:
        sub._queue.clear()  # the connect marker, if the notifier connected after we subscribed
        assert await sub.wait(timeout=0) == []


async def test_notifications_cross_processes_both_ways(db: PostgresDatabase, pg_url: str, notifier: Notifier) -> None:
    async def table(conn: asyncpg.Connection) -> None:
        await conn.execute("CREATE TABLE answered (payload TEXT)")

    await db.write(table)
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    async with notifier.subscribe("pong") as pongs:
        proc = await anyio.open_process([sys.executable, "-m", "tests.store.postgres.notify_peer", pg_url], env=env)
        try:
            assert proc.stdout is not None
            with anyio.fail_after(60):
                line = b""
                while not line.endswith(b"\n"):
                    line += await proc.stdout.receive(1)
            assert line == b"ready\n"
            await db.write(_send("ping", "hello from the parent"))
            assert await _payloads(pongs) == ["hello from the parent"]
            with anyio.fail_after(60):
                assert await proc.wait() == 0

            async def answered(conn: asyncpg.Connection) -> list[str]:
                return [r[0] for r in await conn.fetch("SELECT payload FROM answered")]

            assert await db.read(answered) == ["hello from the parent"]  # written with the pong, visible with it
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.aclose()


async def test_the_listener_reconnects_after_its_backend_is_terminated(
    db: PostgresDatabase, pg_url: str, notifier: Notifier
) -> None:
    async with notifier.subscribe("wake") as sub:
        sub._queue.clear()
        pid = notifier.server_pid
        assert pid is not None
        admin = await asyncpg.connect(pg_url)
        try:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        finally:
            await admin.close()
        with anyio.fail_after(20):
            notes = await sub.wait()
        assert notes[0] == Notification("wake", None)  # reconnected: whatever was sent meanwhile may be lost
        assert notifier.server_pid not in (None, pid)
        await db.write(_send("wake", "after"))
        assert await _payloads(sub) == ["after"]


async def test_an_oversized_payload_is_refused_clearly(db: PostgresDatabase) -> None:
    with pytest.raises(StoreError, match="at most 7999 bytes"):
        await db.write(_send("c", "x" * 8000))


async def test_payloads_sent_with_the_commit_arrive_as_written(db: PostgresDatabase, notifier: Notifier) -> None:
    """Notifications go out in the COMMIT's own round trip, written into its query as literals: quotes,
    backslashes and any other character arrive unchanged, and a NUL (which no literal can hold) is refused."""
    odd = ["it's", "back\\slash \\' E'x'", "ünïcødé ✓", "two''quotes;  SELECT 1"]
    async with notifier.subscribe("odd") as sub:
        for payload in odd:
            await db.write(_send("odd", payload))
        assert await _payloads(sub, len(odd)) == odd
    with pytest.raises(StoreError, match="NUL"):
        await db.write(_send("odd", "a\0b"))
