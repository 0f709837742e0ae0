"""``SQLiteRunStore`` and ``SQLiteRunQueue``: the durable layer's ``RunStore`` and ``RunQueue`` on the embedded
SQLite database, as the store core writes them (``runtime/store/core/runs.py``).

What is SQLite's own: a commit and the claim riding with it are one ``db.write`` (a SAVEPOINT within a
group-committed transaction; a small one may commit on the event loop's thread), its claim under a
savepoint of its own that rolls back alone on ``sqlite3.Error``; and ``watch``, which SQLite cannot do.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence

from anyio.abc import TaskStatus

from runtime.durable.store import ClaimOrder, StepCommit
from runtime.store.core import claims, runs
from runtime.store.core.dialect import SQLITE
from runtime.store.core.statements import Row
from runtime.store.sqlite.database import SQLiteDatabase
from runtime.store.sqlite.executor import SQLiteExecutor, drive

log = logging.getLogger(__name__)


def _claim_within(conn: sqlite3.Connection, order: ClaimOrder) -> list[Row]:
    """``order``'s claim, every scope, inside a write under way; under a savepoint, so that a claim that
    fails (logged) rolls back alone and the write it rides with still commits."""
    conn.execute("SAVEPOINT claim")
    try:
        found = drive(conn, claims.claim(SQLITE, None, order))
    except sqlite3.Error:
        conn.execute("ROLLBACK TO claim")
        log.exception("could not claim a run in the commit that ended another; the worker claims it next")
        found = []
    conn.execute("RELEASE claim")
    return found


class SQLiteRunQueue(runs.CoreRunQueue):
    """Every worker's queue (``StoreBackend.queue()``): every tenant/project of the database."""

    def __init__(self, db: SQLiteDatabase) -> None:
        super().__init__(SQLiteExecutor(db))


class SQLiteRunStore(runs.CoreRunStore):
    """Runs, events, checkpoints, leases, effects and interrupts of one tenant/project, in SQLite."""

    def __init__(self, db: SQLiteDatabase, tenant: str, project: str) -> None:
        super().__init__(SQLiteExecutor(db), tenant, project)
        self.db = db

    async def watch(
        self,
        changed: Callable[[Sequence[str]], None],
        *,
        task_status: TaskStatus[bool],
        cancelled: Callable[[Sequence[str]], None] | None = None,
        quiet_s: float = 5.0,
    ) -> None:
        """SQLite has no way to hear another process's commit: the runtime polls (``POLL_S``, the workers' poll)."""
        task_status.started(False)

    async def _commit(self, step: StepCommit, small: bool) -> list[Row]:
        def write(conn: sqlite3.Connection) -> list[Row]:
            drive(conn, runs.commit(SQLITE, self.scope, step))
            return [] if step.then_claim is None else _claim_within(conn, step.then_claim)

        return await self.db.write(write, small=small)
