"""``PostgresRunStore`` and ``PostgresRunQueue``: the durable layer's ``RunStore`` and ``RunQueue`` protocols
on PostgreSQL (a store is the queue of its own scope, and more).

Each method is one ``db.write`` (a whole transaction, group committed with others under load) or
one ``db.read`` (a read-only snapshot); the SQL itself is in ``durable.py``, ``reap.py`` and
``decisions.py`` and ``claims.py`` beside this module. Several processes (servers, workers) share the database:
claims skip rows another claimer holds, fencing tokens reject a stale worker's writes, and every
change to a run is announced on ``durable.CHANNEL``, which ``watch`` hears from any process.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import anyio
import asyncpg
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
from runtime.store.core.dialect import POSTGRES
from runtime.store.core.run_rows import has_reapable
from runtime.store.core.statements import Op
from runtime.store.postgres import durable
from runtime.store.postgres.database import PostgresDatabase, search_ids
from runtime.store.postgres.durable import CANCEL_CHANNEL, CHANNEL
from runtime.store.postgres.executor import PostgresExecutor, drive
from runtime.store.postgres.notify import Notifier, Subscription, notify
from runtime.store.postgres.sessions import PostgresSessionStore

WATCH_POLL_S = 5.0
"""With no notification for this long, ``watch`` says "anything may have changed" (the polling fallback)."""


log = logging.getLogger(__name__)
T = TypeVar("T")


async def _claim_within(conn: asyncpg.Connection, order: ClaimOrder) -> list[asyncpg.Record]:
    """``order``'s claim, every scope, inside a write under way; under a savepoint, so that a claim that
    fails (logged) rolls back alone and the write it rides with still commits."""
    await conn.execute("SAVEPOINT claim")
    try:
        rows = await drive(conn, claims.claim(POSTGRES, None, *_order(order)))
    except asyncpg.PostgresError:
        await conn.execute("ROLLBACK TO SAVEPOINT claim")
        log.exception("could not claim a run in the commit that ended another; the worker claims it next")
        rows = []
    await conn.execute("RELEASE SAVEPOINT claim")
    await durable.changed(conn, *(r["id"] for r in rows))
    return rows


def _order(o: ClaimOrder) -> tuple[Any, ...]:
    return o.owner, o.lease_s, o.limit, o.workflows, o.holder, o.limits


async def _with_pending(conn: asyncpg.Connection, rows: Sequence[asyncpg.Record]) -> list[Run]:
    """Runs from their rows, each with its pending interrupts (oldest first), in one query for all."""
    ids = [row["id"] for row in rows]
    pending: dict[str, list[Interrupt]] = {run_id: [] for run_id in ids}
    if ids:
        sql = "SELECT * FROM run_interrupts WHERE status = 'pending' AND run_id = ANY($1::text[]) ORDER BY created_at"
        for r in await conn.fetch(sql, ids):
            pending[r["run_id"]].append(Interrupt.from_row(r))
    return [Run.from_row(row, tuple(pending[row["id"]])) for row in rows]


async def _relay(sub: Subscription, hear: Callable[[Sequence[str]], None], quiet_s: float) -> None:
    """Hand the run ids notified on ``sub`` to ``hear``; ``[]`` after a reconnect or ``quiet_s`` of silence."""
    while True:
        notes = await sub.wait(quiet_s)
        if not notes or any(n.payload is None for n in notes):
            hear([])
        else:
            hear(list(dict.fromkeys(n.payload for n in notes if n.payload)))


def _ids(found: list[asyncpg.Record]) -> list[str]:
    return [r["id"] for r in found]


def _same(run_ids: list[str]) -> list[str]:
    return run_ids


def _one(run_id: str) -> list[str]:
    return [run_id]


class PostgresRunQueue:
    """The ``RunQueue`` of the runs a claimer serves: claims, readiness, takeover and reaping.

    ``scope`` None is every tenant/project of the database (``StoreBackend.queue()``, through which
    every worker claims, so ``limits`` count the whole store); ``PostgresRunStore`` is this queue
    for its own scope."""

    def __init__(self, db: PostgresDatabase, scope: Scope | None = None) -> None:
        self.db = db
        self.ex = PostgresExecutor(db)  # runs the store core's operations (runtime/store/core)
        self.scope = scope

    async def _announced(self, ids: Callable[[T], Iterable[str]], make: Callable[..., Op[T]], *args: Any) -> T:
        """Run a core write, and announce the runs it changed (``ids`` of its result; sent on commit)."""

        async def write(conn: asyncpg.Connection) -> T:
            result = await drive(conn, make(POSTGRES, *args))
            await durable.changed(conn, *ids(result))
            return result

        return await self.db.write(write)

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
        rows = await self._announced(_ids, claims.claim, self.scope, owner, lease_s, limit, workflows, holder, limits)
        return [Claim.from_row(row) for row in rows]

    async def holders(self, host: str) -> list[tuple[int, int]]:
        return await self.ex.read(claims.holders, self.scope, host)

    async def take_over(self, host: str, pid: int, started: int) -> list[str]:
        return await self._announced(_same, reap.take_over, self.scope, host, pid, started)

    async def needs_reaping(self) -> bool:
        return await self.ex.read(has_reapable, self.scope)

    async def reap(self) -> list[str]:
        return await self._announced(_same, reap.reap, self.scope)


class PostgresRunStore(PostgresRunQueue):
    """Runs, events, checkpoints, leases, effects and interrupts of one tenant/project, in PostgreSQL.

    Its claims, readiness, takeover and reaping are ``PostgresRunQueue``'s, in this scope."""

    scope: Scope

    def __init__(self, db: PostgresDatabase, tenant: str, project: str) -> None:
        super().__init__(db, Scope(tenant, project))

    # -- starting and reading ---------------------------------------------------------------
    async def create(self, new: NewRun, events: Sequence[EventSpec]) -> str:
        scope = self.scope
        fields = new.columns()

        async def write(conn: asyncpg.Connection) -> str:
            if new.idempotency_key is not None:
                # Two creators with one key at once: the second waits for the first's commit, then finds its run.
                key = new.idempotency_key
                lock = f"{scope.tenant}/{scope.project}/{key}"
                await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", lock)
                old = await conn.fetchrow(
                    "SELECT id, request_hash FROM runs WHERE tenant = $1 AND project = $2 AND idempotency_key = $3",
                    scope.tenant, scope.project, key,
                )  # fmt: skip
                if old is not None:
                    if old["request_hash"] != new.request_hash:
                        raise idempotency_conflict(key, old["id"], old["request_hash"], new.request_hash)
                    return str(old["id"])
            return await durable.insert_run(conn, scope, fields, events)

        return await self.db.write(write)

    async def get(self, run_id: str) -> Run:
        async def read(conn: asyncpg.Connection) -> Run:
            return (await _with_pending(conn, [await durable.run_row(conn, self.scope, run_id)]))[0]

        return await self.db.read(read)

    async def by_idempotency_key(self, key: str) -> str | None:
        sql = "SELECT id FROM runs WHERE tenant = $1 AND project = $2 AND idempotency_key = $3"
        found = await self.db.read(lambda conn: conn.fetchval(sql, self.scope.tenant, self.scope.project, key))
        return None if found is None else str(found)

    async def page(self, status: str | None, workflow: str | None, before: str | None, limit: int) -> list[Run]:
        sql = "SELECT * FROM runs WHERE tenant = $1 AND project = $2"
        args: list[Any] = [self.scope.tenant, self.scope.project]
        for col, value in (("status", status), ("workflow", workflow), ("id <", before)):
            if value is not None:
                args.append(value)
                sql += f" AND {col if ' ' in col else col + ' ='} ${len(args)}"
        args.append(limit)
        sql += f" ORDER BY id DESC LIMIT ${len(args)}"

        async def read(conn: asyncpg.Connection) -> list[Run]:
            return await _with_pending(conn, await conn.fetch(sql, *args))

        return await self.db.read(read)

    async def ids(self, prefix: str, limit: int) -> list[str]:
        return await search_ids(self.db, "runs", self.scope.tenant, self.scope.project, prefix, limit)

    async def events(self, run_id: str, after_seq: int, limit: int) -> list[Event]:
        async def read(conn: asyncpg.Connection) -> list[Event]:
            await durable.run_row(conn, self.scope, run_id)
            rows = await conn.fetch(
                "SELECT * FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                run_id, after_seq, limit,
            )  # fmt: skip
            return [Event.from_row(r) for r in rows]

        return await self.db.read(read)

    async def checkpoints(self, run_id: str) -> list[dict[str, Any]]:
        async def read(conn: asyncpg.Connection) -> list[dict[str, Any]]:
            await durable.run_row(conn, self.scope, run_id)
            rows = await conn.fetch("SELECT * FROM run_checkpoints WHERE run_id = $1 ORDER BY seq", run_id)
            return [checkpoint_dict(r) for r in rows]

        return await self.db.read(read)

    async def interrupts(self, run_id: str | None) -> list[Interrupt]:
        sql = "SELECT * FROM run_interrupts WHERE status = 'pending' AND tenant = $1 AND project = $2"
        args: tuple[Any, ...] = (self.scope.tenant, self.scope.project)
        if run_id is not None:
            sql, args = sql + " AND run_id = $3", (*args, run_id)

        async def read(conn: asyncpg.Connection) -> list[Interrupt]:
            if run_id is not None:
                await durable.run_row(conn, self.scope, run_id)
            return [Interrupt.from_row(r) for r in await conn.fetch(sql + " ORDER BY created_at", *args)]

        return await self.db.read(read)

    async def effects(self, status: str | None, run_id: str | None) -> list[Effect]:
        sql = "SELECT * FROM run_effects WHERE tenant = $1 AND project = $2"
        args: list[Any] = [self.scope.tenant, self.scope.project]
        for col, value in (("status", status), ("run_id", run_id)):
            if value is not None:
                args.append(value)
                sql += f" AND {col} = ${len(args)}"

        async def read(conn: asyncpg.Connection) -> list[Effect]:
            return [Effect.from_row(r) for r in await conn.fetch(sql + " ORDER BY created_at, id", *args)]

        return await self.db.read(read)

    # -- steering, by the service (no lease) ------------------------------------------------
    async def cancel(self, run_id: str, reason: str | None) -> None:
        async def write(conn: asyncpg.Connection) -> None:
            run = await durable.run_row(conn, self.scope, run_id, lock=True)
            if run["status"] in TERMINAL:
                return
            if run["status"] == "running":
                events: list[EventSpec] = [("run.cancel_requested", {"reason": reason})]
                await durable.plain_update(conn, run_id, {"cancel_requested": 1, "cancel_reason": reason}, events)
                await notify(conn, CANCEL_CHANNEL, run_id)  # its worker, wherever it is
                return
            sets = {"error": f"cancelled: {reason or 'by request'}", "cancel_requested": 1}
            await durable.end_unheld(conn, run_id, "cancelled", reason, sets)

        await self.db.write(write)

    async def note(self, run_id: str, events: Sequence[EventSpec]) -> None:
        async def write(conn: asyncpg.Connection) -> None:
            await durable.run_row(conn, self.scope, run_id)  # another scope's run is not found
            await durable.plain_update(conn, run_id, {}, events)

        await self.db.write(write)

    async def decide(self, interrupt_id: str, decision: Decision, check: CheckInterrupt) -> str:
        return await self._announced(_one, decisions.decide, self.scope, interrupt_id, decision, check)

    async def settle_effect(self, effect_id: str, applied: bool, result_json: str | None) -> str:
        return await self._announced(_one, decisions.settle_effect, self.scope, effect_id, applied, result_json)

    # -- other processes --------------------------------------------------------------------
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
                async with notifier.subscribe(CHANNEL) as runs, notifier.subscribe(CANCEL_CHANNEL) as cancels:
                    if cancelled is not None:
                        tg.start_soon(_relay, cancels, cancelled, math.inf)
                    task_status.started(True)
                    await _relay(runs, changed, quiet_s)
            finally:
                notifier.close()

    # -- workers (claims, takeover and reaping: ``PostgresRunQueue``) -----------------------
    async def renew(self, leases: Sequence[tuple[str, int]], lease_s: float) -> dict[str, str]:
        return await self.db.write(lambda c: durable.renew(c, leases, lease_s))

    async def cancel_requests(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        ids = list(run_ids)
        if not ids:
            return {}
        sql = "SELECT id, cancel_reason FROM runs WHERE cancel_requested = 1 AND id = ANY($1::text[])"

        async def read(conn: asyncpg.Connection) -> dict[str, str | None]:
            return {row["id"]: row["cancel_reason"] for row in await conn.fetch(sql, ids)}

        return await self.db.read(read)

    async def release(self, leases: Sequence[tuple[str, int]]) -> None:
        await self.db.write(lambda c: durable.release(c, leases))

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

        async def write(conn: asyncpg.Connection) -> list[asyncpg.Record]:
            at = now()
            for step in held:
                await durable.guarded_update(
                    conn, run_id, token, step.change, step.events, checkpoint=step.checkpoint, at=at
                )
            todo = list(events)
            if settle:
                await durable.lock_held(conn, run_id, token)  # the run first, then its effects
                await drive(conn, reap.settle_in_flight(POSTGRES, run_id, todo))
            todo += tail
            row = change if retry_in_s is None else {**change, "next_at": at + retry_in_s}
            if output_session is not None:
                sessions = PostgresSessionStore(self.db, scope.tenant, scope.project)
                row = {**row, "output_session_id": (await sessions.insert_in(conn, output_session)).id}
            await durable.guarded_update(conn, run_id, token, row, todo, checkpoint=checkpoint, at=at)
            return [] if then_claim is None else await _claim_within(conn, then_claim)

        return [Claim.from_row(row) for row in await self.db.write(write)]

    async def visit_effects(self, run_id: str, visit: int) -> list[Effect]:
        sql = "SELECT * FROM run_effects WHERE run_id = $1 AND visit = $2 ORDER BY created_at, id"

        async def read(conn: asyncpg.Connection) -> list[Effect]:
            return [Effect.from_row(r) for r in await conn.fetch(sql, run_id, visit)]

        return await self.db.read(read)

    async def record_effect(self, run_id: str, token: int, record: EffectRecord) -> Effect:
        scope = self.scope

        async def write(conn: asyncpg.Connection) -> Effect:
            event = (f"effect.{record.status}", {"effect_id": record.id, "key": record.key})
            await durable.guarded_update(conn, run_id, token, {}, [event])
            at = now()
            row = await conn.fetchrow(
                "INSERT INTO run_effects (id, run_id, tenant, project, step, visit, key, effect_class, status, "
                "result, error, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, "
                "$12) ON CONFLICT (id) DO UPDATE SET status = excluded.status, result = excluded.result, "
                "error = excluded.error, effect_class = excluded.effect_class, updated_at = excluded.updated_at "
                "RETURNING *",
                record.id, run_id, scope.tenant, scope.project, record.step, record.visit, record.key,
                record.effect_class, record.status, record.result_json, record.error, at,
            )  # fmt: skip
            return Effect.from_row(row)

        return await self.db.write(write)

    async def visit_interrupts(self, run_id: str, visit: int) -> dict[int, Interrupt]:
        sql = "SELECT * FROM run_interrupts WHERE run_id = $1 AND visit = $2"

        async def read(conn: asyncpg.Connection) -> dict[int, Interrupt]:
            return {r["ordinal"]: Interrupt.from_row(r) for r in await conn.fetch(sql, run_id, visit)}

        return await self.db.read(read)

    async def park(self, run_id: str, token: int, interrupt: NewInterrupt, state_json: str) -> None:
        scope, i = self.scope, interrupt

        async def write(conn: asyncpg.Connection) -> None:
            events: list[EventSpec] = [
                ("interrupt.created", {"interrupt_id": i.id, "kind": i.kind, "step": i.step}),
                ("checkpoint.created", {"step": i.step, "pending": [i.id]}),
                ("run.state.changed", {"status": "waiting", "interrupt_id": i.id}),
            ]
            sets = {"status": "waiting", "lease_owner": None, "lease_expires": None}
            await durable.guarded_update(conn, run_id, token, sets, events, checkpoint=(state_json, i.step, [i.id]))
            await conn.execute(
                "INSERT INTO run_interrupts (id, run_id, tenant, project, step, visit, ordinal, kind, prompt, schema, "
                "status, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', $11, $12)",
                i.id, run_id, scope.tenant, scope.project, i.step, i.visit, i.ordinal, i.kind, i.prompt,
                dumps(i.schema) if i.schema is not None else None, i.expires_at, now(),
            )  # fmt: skip

        await self.db.write(write)
