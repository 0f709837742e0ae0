"""A real PostgreSQL restart and a real outage, on a private server of this test's own: under the
database layer (a write in flight, a listener), and under the runtime (a run in flight).

The machine's server is shared (other test runs use it), so this test makes a throwaway cluster
(``initdb`` in a temporary directory, on a free port below the ephemeral range: ``tests/ports.py``, run
as the ``postgres`` user when we are root, as PostgreSQL refuses to run as root), restarts it under a
write in flight and a listening notifier, and stops it to see the calls made meanwhile fail clearly,
and a run's step end meanwhile (its commit waits for the server and is made once it is back:
``runtime/durable/outage.py``).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import asyncpg
import pytest

from runtime import Runtime, StepContext, Workflow, step
from runtime.errors import StoreError
from runtime.store import parse_store_url
from runtime.store.postgres import PostgresDatabase
from runtime.store.postgres import backend as postgres
from runtime.store.postgres.notify import Notification, Notifier, notify
from tests.needs import unavailable
from tests.ports import quiet_ports
from tests.store.postgres.outage_flow import Paying, hearing

pytestmark = pytest.mark.anyio


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


class Cluster:
    def __init__(self, root: Path, port: int) -> None:
        self.root, self.port, self.data = root, port, root / "data"

    def _run(self, *args: str) -> None:
        command = list(args)
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def ctl(self, action: str) -> None:
        pg_ctl = _bin("pg_ctl")
        assert pg_ctl is not None
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self.root / "server.log")  # the server's own output: never our pipes, which it would hold open
        self._run(pg_ctl, "-D", str(self.data), "-l", log, "-o", options, "-m", "fast", "-w", "-t", "60", action)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    initdb = _bin("initdb")
    if initdb is None or _bin("pg_ctl") is None:
        unavailable("initdb/pg_ctl", "apt-get install postgresql")
    root = Path(tempfile.mkdtemp(prefix="rath-pg-"))
    (port,) = quiet_ports(1)  # not from the ephemeral range: the server binds it again after each stop
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    c = Cluster(root, port)
    try:
        c._run(initdb, "-D", str(c.data), "-A", "trust", "-U", "postgres", "--no-sync")
        c.ctl("start")
        yield c
    finally:
        try:
            c.ctl("stop")
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(root, ignore_errors=True)


async def test_a_restart_under_a_write_in_flight_and_a_listener_loses_and_doubles_nothing(cluster: Cluster) -> None:
    db = PostgresDatabase(cluster.url, max_size=3)
    await db.open()
    notifier = Notifier(cluster.url)
    try:

        async def setup(conn: asyncpg.Connection) -> None:
            await conn.execute("DROP TABLE IF EXISTS t; CREATE TABLE t (k TEXT PRIMARY KEY)")

        await db.write(setup)
        holding, release = anyio.Event(), anyio.Event()
        attempts: list[int] = []

        async def in_flight(conn: asyncpg.Connection) -> str:
            attempts.append(1)
            await conn.execute("INSERT INTO t VALUES ('in flight')")
            if len(attempts) == 1:
                holding.set()
                await release.wait()  # the server restarts here
            await notify(conn, "t", "in flight")
            return "committed"

        async with anyio.create_task_group() as tg:
            await tg.start(notifier.run)
            async with notifier.subscribe("t") as sub:
                result: list[str] = []
                written = anyio.Event()

                async def writer() -> None:
                    result.append(await db.write(in_flight))
                    written.set()

                tg.start_soon(writer)
                await holding.wait()
                await anyio.to_thread.run_sync(cluster.ctl, "restart")
                with anyio.fail_after(60):
                    # The listener reconnects and says so (what was sent while it was away is lost: a
                    # waiter looks at the state again). Only then can it hear the write's notification.
                    assert (await sub.wait())[0] == Notification("t", None)
                release.set()
                with anyio.fail_after(60):
                    notes: list[Notification] = []
                    while Notification("t", "in flight") not in notes:
                        notes += await sub.wait()
                    await written.wait()
                assert result == ["committed"] and len(attempts) == 2  # rolled back by the restart, run again once
            notifier.close()

        async def keys(conn: asyncpg.Connection) -> list[str]:
            return [r[0] for r in await conn.fetch("SELECT k FROM t")]

        assert await db.read(keys) == ["in flight"]
    finally:
        notifier.close()
        await db.close()


async def test_calls_while_the_server_is_down_fail_clearly_and_work_once_it_is_back(cluster: Cluster) -> None:
    db = PostgresDatabase(cluster.url, max_size=2)
    await db.open()
    try:

        async def one(conn: asyncpg.Connection) -> int:
            return int(await conn.fetchval("SELECT 1"))

        assert await db.read(one) == 1
        await anyio.to_thread.run_sync(cluster.ctl, "stop")
        try:
            with anyio.fail_after(30), pytest.raises(StoreError, match="is unreachable"):
                await db.read(one)
            with anyio.fail_after(30), pytest.raises(StoreError, match="is unreachable"):
                await db.write(one)
        finally:
            await anyio.to_thread.run_sync(cluster.ctl, "start")
        assert await db.write(one) == 1
        assert await db.read(one) == 1
    finally:
        await db.close()


class Held(Workflow):
    """A non-idempotent effect, then a hold the test releases, then a second step."""

    name = "held"

    def __init__(self) -> None:
        self.applied: list[str] = []
        self.holding, self.release = anyio.Event(), anyio.Event()

    def _pay(self, run_id: str) -> str:
        self.applied.append(run_id)
        return "paid"

    @step(entry=True, successors=["after"])
    async def hold(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        paid: str = await ctx.effect("pay", partial(self._pay, ctx.run_id))
        self.holding.set()
        await self.release.wait()  # the database restarts here, under the running step
        return {**state, "paid": paid}

    @step()
    async def after(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "after": True}


async def test_a_run_in_flight_goes_on_after_a_database_restart_and_calls_while_down_fail_clearly(
    cluster: Cluster, tmp_path: Path
) -> None:
    name = f"r_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(cluster.url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = cluster.url.rsplit("/", 1)[0] + "/" + name
    await postgres.migrate(parse_store_url(url))
    flow = Held()
    async with Runtime.open(tmp_path, store=url, workers=1) as rt:
        rt.workflows.register(flow)
        run = await rt.runs.start("held")
        with anyio.fail_after(60):
            await flow.holding.wait()
        await anyio.to_thread.run_sync(cluster.ctl, "stop")
        try:
            calls: list[Callable[[], Awaitable[object]]] = [
                partial(rt.runs.get, run.id),
                partial(rt.runs.start, "held"),
            ]
            for call in calls:
                with anyio.fail_after(60), pytest.raises(StoreError, match=r"PostgreSQL store at .* is unreachable"):
                    await call()
        finally:
            await anyio.to_thread.run_sync(cluster.ctl, "start")
        flow.release.set()
        done = await rt.runs.wait(run.id, 60)
        assert done.status == "succeeded", done.error
        events = [e.type for e in await rt.runs.events(run.id, 0, 1000)]
        assert events.count("step.completed") == 2 and events.count("effect.succeeded") == 1
        assert [e.status for e in await rt.runs.effects(None, run.id)] == ["succeeded"]
        assert (await rt.runs.list())[0] == [done]  # the run started while down was never written
    assert flow.applied == [run.id]


async def test_a_commit_tried_while_the_database_is_down_goes_through_once_it_is_back_without_waiting_for_the_lease(
    cluster: Cluster, tmp_path: Path
) -> None:
    name = f"o_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(cluster.url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = cluster.url.rsplit("/", 1)[0] + "/" + name
    await postgres.migrate(parse_store_url(url))
    flow = Paying()
    # A lease of 120 s and waits well under it: a run that moves on before them was not taken over by
    # another claim after its lease ran out (the stall this test was written for), it went on by itself.
    async with Runtime.open(tmp_path, store=url, workers=1, lease_s=120) as rt:
        rt.workflows.register(flow)
        run = await rt.runs.start("paying")
        waiting, crashed = f"run {run.id}'s commit waits for the store", "crashed the runner"
        with hearing(waiting, crashed) as heard:
            with anyio.fail_after(30):
                await flow.holding.wait()
            await anyio.to_thread.run_sync(cluster.ctl, "stop")
            try:
                flow.release.set()  # the step ends: its commit finds the database down
                with anyio.fail_after(30):
                    await heard.any.wait()
                assert heard[waiting].is_set() and not heard[crashed].is_set()
            finally:
                await anyio.to_thread.run_sync(cluster.ctl, "start")  # returns once it accepts connections
            with anyio.fail_after(20):
                await flow.second.wait()
            done = await rt.runs.wait(run.id, 20)
        assert not heard[crashed].is_set()
        assert done.status == "succeeded", done.error
        events = [e.type for e in await rt.runs.events(run.id, 0, 1000)]
        assert events.count("step.completed") == 2 and events.count("effect.succeeded") == 2
        ledger = await rt.runs.effects(None, run.id)
        assert sorted((e.key, e.status) for e in ledger) == [("pay", "succeeded"), ("ship", "succeeded")]
    assert flow.applied == [(run.id, "paid"), (run.id, "shipped")]
