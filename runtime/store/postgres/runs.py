"""``PostgresRunStore``: the durable layer's ``RunStore`` on PostgreSQL, the store core's
(``runtime/store/core/runs.py``) with what is PostgreSQL's own.

Several processes (servers, workers) share the database, so every write of a run tells the others
(``run_rows.changed``: a notice on ``CHANNEL`` sent as the write commits, ``notify.py``), which ``watch``
hears from any process; a cancel of a running run is also told on ``CANCEL_CHANNEL`` for its worker.
A step commit that claims nothing (and ``step_commits.mergeable``) is made with the other such commits of
its batch, every run's in ONE statement (``runtime/store/core/step_commits.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import asyncpg
from anyio.abc import TaskStatus

from runtime.durable.store import StepCommit
from runtime.errors import LeaseLostError
from runtime.store.core import runs, step_commits
from runtime.store.core.dialect import POSTGRES
from runtime.store.core.run_rows import CANCEL_CHANNEL, CHANNEL
from runtime.store.core.statements import Row
from runtime.store.postgres.executor import PostgresExecutor, drive
from runtime.store.postgres.notify import Notifier, Subscription

WATCH_POLL_S = 5.0
"""With no notification for this long, ``watch`` says "anything may have changed" (the polling fallback)."""


async def _commit_merged(conn: asyncpg.Connection, steps: list[StepCommit]) -> tuple[list[Any], str | None]:
    """A batch's mergeable step commits (``PostgresDatabase``'s ``Merge``): each committed, or
    ``LeaseLostError`` where its lease was lost (nothing of it written, as on its own)."""
    committed, xid = await drive(conn, step_commits.commit_steps(POSTGRES, steps))
    return [[] if step.run_id in committed else LeaseLostError(step.run_id, step.token) for step in steps], xid


async def _relay(sub: Subscription, hear: Callable[[Sequence[str]], None], quiet_s: float) -> None:
    """Hand the run ids notified on ``sub`` to ``hear``; ``[]`` after a reconnect or ``quiet_s`` of silence."""
    while True:
        notes = await sub.wait(quiet_s)
        if not notes or any(n.payload is None for n in notes):
            hear([])
        else:
            hear(list(dict.fromkeys(n.payload for n in notes if n.payload)))


class PostgresRunStore(runs.CoreRunStore):
    """Runs, events, checkpoints, leases, effects and interrupts of one tenant/project, in PostgreSQL."""

    ex: PostgresExecutor

    async def _commit(self, step: StepCommit, small: bool) -> list[Row]:
        async def write(conn: asyncpg.Connection) -> list[Row]:
            return await drive(conn, runs.commit(POSTGRES, self.scope, step))

        if step_commits.mergeable(step):  # with the other runs' step commits of its batch, in one statement
            return await self.ex.db.write(write, merge=_commit_merged, payload=step)
        return await self.ex.db.write(write)

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
        notifier = Notifier(self.ex.db.dsn)
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
