"""``PostgresRunStore.watch`` across processes: a run created, an interrupt decided and a cancel made in
another process reach this one's watcher through LISTEN/NOTIFY, not through its polling fallback.

The watcher's fallback reports ``[]`` ("look again"), which these tests never count: only a
notification naming the run, followed by the run being seen in the state the peer left it, ends
a wait (so a notification of this process's own earlier write cannot pass for the peer's).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from functools import partial

import anyio
import pytest

from runtime.durable.models import Run
from runtime.durable.store import NewInterrupt, RunStore
from runtime.ids import new_id
from runtime.store import parse_store_url
from runtime.store.postgres import backend as postgres

pytestmark = pytest.mark.anyio


async def peer(url: str, *args: str) -> str:
    """Run ``tests.store.postgres.run_peer`` in a process of its own; its output."""
    done = await anyio.run_process([sys.executable, "-m", "tests.store.postgres.run_peer", url, *args])
    return done.stdout.decode().strip()


class Heard:
    """The run ids the watcher was told of, and a way to wait for one of them to reach a state."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.arrived = anyio.Event()

    def __call__(self, run_ids: Sequence[str]) -> None:
        if run_ids:  # [] is the fallback's "look again": not a notification
            self.ids.update(run_ids)
            self.arrived.set()

    async def until(self, store: RunStore, run_id: str, reached: Callable[[Run], bool]) -> Run:
        while True:
            if run_id in self.ids:
                self.ids.discard(run_id)
                if reached(run := await store.get(run_id)):
                    return run
            else:
                await self.arrived.wait()
                self.arrived = anyio.Event()


async def test_another_processs_create_decision_and_cancel_reach_the_watcher(pg_url: str) -> None:
    url = parse_store_url(pg_url)
    await postgres.migrate(url)
    backend = await postgres.open(url)
    store = backend.runs("local", "default")
    heard = Heard()
    try:
        with anyio.fail_after(60):  # a safety net only: each wait ends on a notification
            async with anyio.create_task_group() as tg:
                assert await tg.start(partial(store.watch, heard)) is True
                run_id = await peer(pg_url, "create")
                await heard.until(store, run_id, lambda run: run.status == "queued")

                (claim,) = await store.claim("here", 30.0, 1, ["wf"])
                asked = NewInterrupt(new_id("int"), "first", 1, 0, "approval", "ok?", None, None)
                await store.park(run_id, claim.token, asked, "{}")
                await peer(pg_url, "decide", asked.id)
                await heard.until(store, run_id, lambda run: run.status == "queued" and not run.pending_interrupts)

                await store.claim("here", 30.0, 1, ["wf"])
                await peer(pg_url, "cancel", run_id)
                ended = await heard.until(store, run_id, lambda run: run.cancel_requested)
                assert ended.status == "running"  # its worker (here) is asked to stop; nothing else changed
                tg.cancel_scope.cancel()
    finally:
        await backend.close()
