"""``PostgresRunStore`` and ``PostgresRunQueue``: the durable layer's ``RunStore`` and ``RunQueue`` on
PostgreSQL, as the store core writes them (``runtime/store/core/runs.py``).

What is PostgreSQL's own: several processes (servers, workers) share the database, so every change
to a run is announced on ``CHANNEL`` (each write's ``announce``: the runs it changed, sent when it
commits, ``notify.py``), which ``watch`` hears from any process; a cancel of a running run is also
sent on ``CANCEL_CHANNEL`` for its worker. A commit and the claim riding with it are one
``db.write`` (group committed, re-run after a lost connection, ``database.py``), its claim under a
savepoint that rolls back alone on ``asyncpg.PostgresError``. A step commit that claims nothing (and
``step_commits.mergeable``) is made with the other such commits of its batch, every run's in ONE
statement (``runtime/store/core/step_commits.py``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio
import asyncpg
from anyio.abc import TaskStatus

from runtime.durable.store import ClaimOrder, StepCommit
from runtime.errors import LeaseLostError
from runtime.store.core import claims, runs, step_commits
from runtime.store.core.dialect import POSTGRES
from runtime.store.core.statements import Op, Row
from runtime.store.postgres.database import PostgresDatabase
from runtime.store.postgres.executor import PostgresExecutor, drive
from runtime.store.postgres.notify import Notifier, Subscription, notify

T = TypeVar("T")

CHANNEL = "rath_runs"
"""The notification channel of run changes; each payload is one run id."""

CANCEL_CHANNEL = "rath_run_cancels"
"""The channel of cancels asked of running runs (each payload one run id): what their workers listen for."""

WATCH_POLL_S = 5.0
"""With no notification for this long, ``watch`` says "anything may have changed" (the polling fallback)."""

log = logging.getLogger(__name__)


async def _changed(conn: asyncpg.Connection, run_ids: Sequence[str]) -> None:
    """Tell other processes (on commit) that these runs changed."""
    for run_id in dict.fromkeys(run_ids):
        await notify(conn, CHANNEL, run_id)


async def announced(db: PostgresDatabase, announce: runs.Announce, make: Callable[..., Op[T]], *args: Any) -> T:
    """Run ``make``'s operation in a write and announce the runs ``announce`` names from its result (on commit)."""

    async def write(conn: asyncpg.Connection) -> T:
        result = await drive(conn, make(POSTGRES, *args))
        await _changed(conn, list(announce(result)))
        return result

    return await db.write(write)


async def _commit_merged(conn: asyncpg.Connection, steps: list[StepCommit]) -> tuple[list[Any], str | None]:
    """A batch's mergeable step commits (``PostgresDatabase``'s ``Merge``): each announced once made, or
    ``LeaseLostError`` where its lease was lost (nothing of it written, as on its own)."""
    committed, xid = await drive(conn, step_commits.commit_steps(POSTGRES, steps))
    await _changed(conn, [step.run_id for step in steps if step.run_id in committed])
    return [[] if step.run_id in committed else LeaseLostError(step.run_id, step.token) for step in steps], xid


async def _claim_within(conn: asyncpg.Connection, order: ClaimOrder) -> list[Row]:
    """``order``'s claim, every scope, inside a write under way; under a savepoint, so that a claim that
    fails (logged) rolls back alone and the write it rides with still commits."""
    await conn.execute("SAVEPOINT claim")
    try:
        op = claims.claim(POSTGRES, None, order)
        found: list[Row] = await drive(conn, op)
    except asyncpg.PostgresError:
        await conn.execute("ROLLBACK TO SAVEPOINT claim")
        log.exception("could not claim a run in the commit that ended another; the worker claims it next")
        found = []
    # Not released (a round trip): the transaction's COMMIT, or the batch's next RELEASE of the savepoint
    # its write runs under, releases it with the rest.
    await _changed(conn, [r["id"] for r in found])
    return found


async def _relay(sub: Subscription, hear: Callable[[Sequence[str]], None], quiet_s: float) -> None:
    """Hand the run ids notified on ``sub`` to ``hear``; ``[]`` after a reconnect or ``quiet_s`` of silence."""
    while True:
        notes = await sub.wait(quiet_s)
        if not notes or any(n.payload is None for n in notes):
            hear([])
        else:
            hear(list(dict.fromkeys(n.payload for n in notes if n.payload)))


class _Announcing:
    """The core's run writes, each announcing the runs it changed (``announced``)."""

    db: PostgresDatabase

    async def _write(self, announce: runs.Announce, make: Callable[..., Op[T]], *args: Any, small: bool = False) -> T:
        return await announced(self.db, announce, make, *args)


class PostgresRunQueue(_Announcing, runs.CoreRunQueue):
    """Every worker's queue (``StoreBackend.queue()``): every tenant/project of the database."""

    def __init__(self, db: PostgresDatabase) -> None:
        super().__init__(PostgresExecutor(db))
        self.db = db


class PostgresRunStore(_Announcing, runs.CoreRunStore):
    """Runs, events, checkpoints, leases, effects and interrupts of one tenant/project, in PostgreSQL."""

    def __init__(self, db: PostgresDatabase, tenant: str, project: str) -> None:
        super().__init__(PostgresExecutor(db), tenant, project)
        self.db = db

    async def cancel(self, run_id: str, reason: str | None) -> None:
        async def write(conn: asyncpg.Connection) -> None:
            changed, running = await drive(conn, runs.cancel(POSTGRES, self.scope, run_id, reason))
            if changed:
                await _changed(conn, [run_id])
            if running:
                await notify(conn, CANCEL_CHANNEL, run_id)  # its worker, wherever it is

        await self.db.write(write)

    async def _commit(self, step: StepCommit, small: bool) -> list[Row]:
        async def write(conn: asyncpg.Connection) -> list[Row]:
            await _changed(conn, [await drive(conn, runs.commit(POSTGRES, self.scope, step))])
            return [] if step.then_claim is None else await _claim_within(conn, step.then_claim)

        if step_commits.mergeable(step):  # with the other runs' step commits of its batch, in one statement
            return await self.db.write(write, merge=_commit_merged, payload=step)
        return await self.db.write(write)

    async def watch(
        self,
        changed: Callable[[Sequence[str]], None],
        *,
        task_status: TaskStatus[bool],
        cancelled: Callable[[Sequence[str]], None] | None = None,
        quiet_s: float = WATCH_POLL_S,
    ) -> None:
        """Hear every process's run changes through LISTEN/NOTIFY on a listening connection of its own.

        After a reconnect (notifications may have been missed) and after ``quiet_s`` of silence,
        ``changed([])``: anything may have changed, look again (the polling fallback). Cancels of
        running runs come on a channel of their own (``CANCEL_CHANNEL``), so that a worker looks
        for a cancel only when one was asked, not after every commit of the runs it holds."""
        notifier = Notifier(self.db.dsn)
        async with anyio.create_task_group() as tg:
            await tg.start(notifier.run)
            try:
                async with notifier.subscribe(CHANNEL) as heard, notifier.subscribe(CANCEL_CHANNEL) as cancels:
                    if cancelled is not None:
                        tg.start_soon(_relay, cancels, cancelled, math.inf)
                    task_status.started(True)
                    await _relay(heard, changed, quiet_s)
            finally:
                notifier.close()
