"""``SQLiteRunStore`` and ``SQLiteRunQueue``: the durable layer's ``RunStore`` and ``RunQueue`` protocols
on the embedded SQLite database (a store is the queue of its own scope, and more).

Each method is one ``db.write`` (a SAVEPOINT within a group-committed transaction) or one
``db.read`` (a snapshot on a reader thread); the SQL itself is in ``durable.py``, ``reap.py`` and
``decisions.py`` and ``claims.py`` beside this module.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from anyio.abc import TaskStatus

from runtime.durable.models import TERMINAL, Decision, Effect, Event, Interrupt, Run, checkpoint_dict
from runtime.durable.store import (
    CheckInterrupt,
    Claim,
    ClaimOrder,
    EffectRecord,
    EventSpec,
    HeldStep,
    Holder,
    Limits,
    NewInterrupt,
    NewRun,
    RunChange,
    StepCheckpoint,
    dumps,
)
from runtime.durable.store_shared import Scope, idempotency_conflict
from runtime.ids import now
from runtime.sessions.store import NewSession
from runtime.store.core import claims, decisions, reap
from runtime.store.core.dialect import SQLITE
from runtime.store.core.run_rows import has_reapable
from runtime.store.sqlite import durable
from runtime.store.sqlite.database import SQLiteDatabase, search_ids
from runtime.store.sqlite.executor import SQLiteExecutor, drive
from runtime.store.sqlite.sessions import SQLiteSessionStore

log = logging.getLogger(__name__)


def _with_pending(conn: sqlite3.Connection, rows: Sequence[sqlite3.Row]) -> list[Run]:
    """Runs from their rows, each with its pending interrupts (oldest first), in one query for all."""
    ids = [row["id"] for row in rows]
    pending: dict[str, list[Interrupt]] = {run_id: [] for run_id in ids}
    marks = ", ".join("?" for _ in ids)
    sql = f"SELECT * FROM run_interrupts WHERE status = 'pending' AND run_id IN ({marks}) ORDER BY created_at"
    for r in conn.execute(sql, ids) if ids else ():
        pending[r["run_id"]].append(Interrupt.from_row(r))
    return [Run.from_row(row, tuple(pending[row["id"]])) for row in rows]


#: A claim of this many runs at most, and a commit of this many events at most whose texts (state, result,
#: error) stay under ``SMALL_TEXT`` characters, are small writes (``SQLiteDatabase.write``): made alone,
#: they commit on the event loop's thread. (Events carry ids and names, and a step's error, which the
#: run's ``error`` carries too.)
SMALL_ROWS = 8
SMALL_TEXT = 64_000


def _small(change: RunChange, events: Sequence[EventSpec], held: Sequence[HeldStep] = ()) -> bool:
    """Whether a commit (with the held steps it makes first) is small: each step's events, and all texts."""
    if len(events) > SMALL_ROWS or any(len(step.events) > SMALL_ROWS for step in held):
        return False
    changes = [change, *(step.change for step in held)]
    return sum(len(v) for c in changes for v in c.values() if isinstance(v, str)) < SMALL_TEXT


def _claim_within(conn: sqlite3.Connection, order: ClaimOrder) -> list[sqlite3.Row]:
    """``order``'s claim, every scope, inside a write under way; under a savepoint, so that a claim that
    fails (logged) rolls back alone and the write it rides with still commits."""
    conn.execute("SAVEPOINT claim")
    try:
        rows = drive(
            conn,
            claims.claim(
                SQLITE, None, order.owner, order.lease_s, order.limit, order.workflows, order.holder, order.limits
            ),
        )
    except sqlite3.Error:
        conn.execute("ROLLBACK TO claim")
        log.exception("could not claim a run in the commit that ended another; the worker claims it next")
        rows = []
    conn.execute("RELEASE claim")
    return rows


class SQLiteRunQueue:
    """The ``RunQueue`` of the runs a claimer serves: claims, readiness, takeover and reaping.

    ``scope`` None is every tenant/project of the database (``StoreBackend.queue()``, through which
    every worker claims, so ``limits`` count the whole store); ``SQLiteRunStore`` is this queue
    for its own scope."""

    def __init__(self, db: SQLiteDatabase, scope: Scope | None = None) -> None:
        self.db = db
        self.ex = SQLiteExecutor(db)  # runs the store core's operations (runtime/store/core)
        self.scope = scope

    async def next_ready(self, workflows: Sequence[str], *, limits: Limits | None = None) -> float | None:
        return await self.ex.read(claims.next_ready, self.scope, workflows, limits or {})

    async def claim(
        self,
        owner: str,
        lease_s: float,
        limit: int,
        workflows: Sequence[str],
        *,
        holder: Holder | None = None,
        limits: Limits | None = None,
    ) -> list[Claim]:
        rows = await self.ex.write(
            claims.claim, self.scope, owner, lease_s, limit, workflows, holder, limits, small=limit <= SMALL_ROWS
        )
        return [Claim.from_row(row) for row in rows]

    async def holders(self, host: str) -> list[tuple[int, int]]:
        return await self.ex.read(claims.holders, self.scope, host)

    async def take_over(self, host: str, pid: int, started: int) -> list[str]:
        return await self.ex.write(reap.take_over, self.scope, host, pid, started)

    async def needs_reaping(self) -> bool:
        return await self.ex.read(has_reapable, self.scope)

    async def reap(self) -> list[str]:
        return await self.ex.write(reap.reap, self.scope)


class SQLiteRunStore(SQLiteRunQueue):
    """Runs, events, checkpoints, leases, effects and interrupts of one tenant/project, in SQLite.

    Its claims, readiness, takeover and reaping are ``SQLiteRunQueue``'s, in this scope."""

    scope: Scope

    def __init__(self, db: SQLiteDatabase, tenant: str, project: str) -> None:
        super().__init__(db, Scope(tenant, project))

    # -- starting and reading ---------------------------------------------------------------
    async def create(self, new: NewRun, events: Sequence[EventSpec]) -> str:
        scope = self.scope
        fields = new.columns()

        def write(conn: sqlite3.Connection) -> str:
            if new.idempotency_key is not None:
                old = conn.execute(
                    "SELECT id, request_hash FROM runs WHERE tenant = ? AND project = ? AND idempotency_key = ?",
                    (scope.tenant, scope.project, new.idempotency_key),
                ).fetchone()
                if old is not None:
                    if old["request_hash"] != new.request_hash:
                        raise idempotency_conflict(
                            new.idempotency_key, old["id"], old["request_hash"], new.request_hash
                        )
                    return str(old["id"])
            return durable.insert_run(conn, scope, fields, events)

        return await self.db.write(write)

    async def get(self, run_id: str) -> Run:
        return await self.db.read(lambda conn: _with_pending(conn, [durable.run_row(conn, self.scope, run_id)])[0])

    async def by_idempotency_key(self, key: str) -> str | None:
        sql = "SELECT id FROM runs WHERE tenant = ? AND project = ? AND idempotency_key = ?"
        args = (self.scope.tenant, self.scope.project, key)
        row = await self.db.read(lambda conn: conn.execute(sql, args).fetchone())
        return None if row is None else str(row["id"])

    async def page(self, status: str | None, workflow: str | None, before: str | None, limit: int) -> list[Run]:
        sql = "SELECT * FROM runs WHERE tenant = ? AND project = ?"
        args: list[Any] = [self.scope.tenant, self.scope.project]
        for col, value in (("status", status), ("workflow", workflow)):
            if value is not None:
                sql, args = sql + f" AND {col} = ?", [*args, value]
        if before is not None:
            sql, args = sql + " AND id < ?", [*args, before]
        sql += " ORDER BY id DESC LIMIT ?"
        return await self.db.read(lambda conn: _with_pending(conn, conn.execute(sql, (*args, limit)).fetchall()))

    async def ids(self, prefix: str, limit: int) -> list[str]:
        return await search_ids(self.db, "runs", self.scope.tenant, self.scope.project, prefix, limit)

    async def events(self, run_id: str, after_seq: int, limit: int) -> list[Event]:
        def read(conn: sqlite3.Connection) -> list[Event]:
            durable.run_row(conn, self.scope, run_id)
            rows = conn.execute(
                f"SELECT {durable.EVENT_COLUMNS} FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (run_id, after_seq, limit),
            )
            return [Event.from_row(r) for r in rows]

        return await self.db.read(read)

    async def checkpoints(self, run_id: str) -> list[dict[str, Any]]:
        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            durable.run_row(conn, self.scope, run_id)
            rows = conn.execute(
                "SELECT seq, cp_state AS state, cp_next_step AS next_step, cp_pending AS pending, "
                "cp_session_id AS session_id, created_at FROM run_events "
                "WHERE run_id = ? AND cp_pending IS NOT NULL ORDER BY seq",
                (run_id,),
            )
            return [checkpoint_dict(r) for r in rows]

        return await self.db.read(read)

    async def interrupts(self, run_id: str | None) -> list[Interrupt]:
        sql = "SELECT * FROM run_interrupts WHERE status = 'pending' AND tenant = ? AND project = ?"
        args: tuple[Any, ...] = (self.scope.tenant, self.scope.project)
        if run_id is not None:
            sql, args = sql + " AND run_id = ?", (*args, run_id)

        def read(conn: sqlite3.Connection) -> list[Interrupt]:
            if run_id is not None:
                durable.run_row(conn, self.scope, run_id)
            return [Interrupt.from_row(r) for r in conn.execute(sql + " ORDER BY created_at", args)]

        return await self.db.read(read)

    async def effects(self, status: str | None, run_id: str | None) -> list[Effect]:
        sql = "SELECT * FROM run_effects WHERE tenant = ? AND project = ?"
        args: tuple[Any, ...] = (self.scope.tenant, self.scope.project)
        if status is not None:
            sql, args = sql + " AND status = ?", (*args, status)
        if run_id is not None:
            sql, args = sql + " AND run_id = ?", (*args, run_id)
        return await self.db.read(lambda c: [Effect.from_row(r) for r in c.execute(sql + " ORDER BY created_at", args)])

    # -- steering ---------------------------------------------------------------------------
    async def cancel(self, run_id: str, reason: str | None) -> None:
        def write(conn: sqlite3.Connection) -> None:
            row = durable.run_row(conn, self.scope, run_id)
            if row["status"] in TERMINAL:
                return
            if row["status"] == "running":
                events: list[EventSpec] = [("run.cancel_requested", {"reason": reason})]
                durable.plain_update(conn, run_id, {"cancel_requested": 1, "cancel_reason": reason}, events)
                return
            sets = {"error": f"cancelled: {reason or 'by request'}", "cancel_requested": 1}
            durable.end_unheld(conn, run_id, "cancelled", reason, sets)

        await self.db.write(write)

    async def decide(self, interrupt_id: str, decision: Decision, check: CheckInterrupt) -> str:
        return await self.ex.write(decisions.decide, self.scope, interrupt_id, decision, check)

    async def settle_effect(self, effect_id: str, applied: bool, result_json: str | None) -> str:
        return await self.ex.write(decisions.settle_effect, self.scope, effect_id, applied, result_json)

    async def note(self, run_id: str, events: Sequence[EventSpec]) -> None:
        def write(conn: sqlite3.Connection) -> None:
            durable.run_row(conn, self.scope, run_id)  # another scope's run is not found
            durable.plain_update(conn, run_id, {}, events)

        await self.db.write(write)

    # -- other processes --------------------------------------------------------------------
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

    # -- workers (claims, takeover and reaping: ``SQLiteRunQueue``) -------------------------
    async def renew(self, leases: Sequence[tuple[str, int]], lease_s: float) -> dict[str, str]:
        return await self.db.write(partial(durable.renew, leases=leases, lease_s=lease_s))

    async def cancel_requests(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        ids = list(run_ids)
        if not ids:
            return {}
        marks = ", ".join("?" for _ in ids)
        sql = f"SELECT id, cancel_reason FROM runs WHERE cancel_requested = 1 AND id IN ({marks})"
        return await self.db.read(lambda c: {row["id"]: row["cancel_reason"] for row in c.execute(sql, ids)})

    async def release(self, leases: Sequence[tuple[str, int]]) -> None:
        await self.db.write(partial(durable.release, leases=leases))

    # -- under a lease ----------------------------------------------------------------------
    async def commit(
        self,
        run_id: str,
        token: int,
        change: RunChange,
        events: Sequence[EventSpec],
        *,
        settle: bool = False,
        tail: Sequence[EventSpec] = (),
        checkpoint: StepCheckpoint | None = None,
        retry_in_s: float | None = None,
        output_session: NewSession | None = None,
        then_claim: ClaimOrder | None = None,
        held: Sequence[HeldStep] = (),
    ) -> list[Claim]:
        scope = self.scope

        def write(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            at = now()
            for step in held:
                durable.guarded_update(conn, run_id, token, step.change, step.events, checkpoint=step.checkpoint, at=at)
            todo = list(events)
            if settle:
                drive(conn, reap.settle_in_flight(SQLITE, run_id, todo))
            todo += tail
            row = change if retry_in_s is None else {**change, "next_at": at + retry_in_s}
            if output_session is not None:
                sessions = SQLiteSessionStore(self.db, scope.tenant, scope.project)
                row = {**row, "output_session_id": sessions.insert_in(conn, output_session).id}
            durable.guarded_update(conn, run_id, token, row, todo, checkpoint=checkpoint, at=at)
            return [] if then_claim is None else _claim_within(conn, then_claim)

        rows = await self.db.write(write, small=_small(change, events, held))
        return [Claim.from_row(row) for row in rows]

    async def visit_effects(self, run_id: str, visit: int) -> list[Effect]:
        sql = "SELECT * FROM run_effects WHERE run_id = ? AND visit = ?"
        return await self.db.read(lambda c: [Effect.from_row(r) for r in c.execute(sql, (run_id, visit))])

    async def record_effect(self, run_id: str, token: int, record: EffectRecord) -> Effect:
        scope = self.scope

        def write(conn: sqlite3.Connection) -> Effect:
            event = (f"effect.{record.status}", {"effect_id": record.id, "key": record.key})
            durable.guarded_update(conn, run_id, token, {}, [event])
            at = now()
            conn.execute(
                "INSERT INTO run_effects (id, run_id, tenant, project, step, visit, key, effect_class, status, "
                "result, error, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET status = excluded.status, result = excluded.result, "
                "error = excluded.error, effect_class = excluded.effect_class, updated_at = excluded.updated_at",
                (record.id, run_id, scope.tenant, scope.project, record.step, record.visit, record.key,
                 record.effect_class, record.status, record.result_json, record.error, at, at),
            )  # fmt: skip
            return Effect.from_row(conn.execute("SELECT * FROM run_effects WHERE id = ?", (record.id,)).fetchone())

        return await self.db.write(write)

    async def visit_interrupts(self, run_id: str, visit: int) -> dict[int, Interrupt]:
        sql = "SELECT * FROM run_interrupts WHERE run_id = ? AND visit = ?"
        return await self.db.read(
            lambda c: {r["ordinal"]: Interrupt.from_row(r) for r in c.execute(sql, (run_id, visit))}
        )

    async def park(self, run_id: str, token: int, interrupt: NewInterrupt, state_json: str) -> None:
        scope, i = self.scope, interrupt

        def write(conn: sqlite3.Connection) -> None:
            events: list[EventSpec] = [
                ("interrupt.created", {"interrupt_id": i.id, "kind": i.kind, "step": i.step}),
                ("checkpoint.created", {"step": i.step, "pending": [i.id]}),
                ("run.state.changed", {"status": "waiting", "interrupt_id": i.id}),
            ]
            sets = {"status": "waiting", "lease_owner": None, "lease_expires": None}
            durable.guarded_update(conn, run_id, token, sets, events, checkpoint=(state_json, i.step, [i.id]))
            conn.execute(
                "INSERT INTO run_interrupts (id, run_id, tenant, project, step, visit, ordinal, kind, prompt, schema, "
                "status, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
                (i.id, run_id, scope.tenant, scope.project, i.step, i.visit, i.ordinal, i.kind, i.prompt,
                 dumps(i.schema) if i.schema is not None else None, i.expires_at, now()),
            )  # fmt: skip

        await self.db.write(write)
