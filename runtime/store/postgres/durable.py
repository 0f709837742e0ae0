"""SQL of the durable layer on PostgreSQL: the pieces ``PostgresRunStore`` (``runs.py``) composes, each
awaited on a connection inside ``db.write``/``db.read``. The same statements as the SQLite backend's
``durable.py``, ported to PostgreSQL's concurrency: several processes write at once here.

Locking order, so that concurrent writers never deadlock on one run: a write locks the run's row
first (the fenced UPDATE, or ``SELECT ... FOR UPDATE``) and only then touches its interrupts and
effects. Claims and the reaper take ``FOR UPDATE SKIP LOCKED``: two workers never claim, and two
reapers never requeue, the same run, and neither waits for the other.

Every change to a run sends its id on ``CHANNEL`` (``notify``), delivered when the write commits:
that is how another process's ``watch`` hears of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from runtime.durable.store import EventSpec, RunChange, dumps
from runtime.durable.store_shared import Scope, check_change, no_run
from runtime.errors import LeaseLostError, NotFoundError
from runtime.ids import new_id, now
from runtime.store.postgres.notify import notify

CHANNEL = "rath_runs"
"""The notification channel of run changes; each payload is one run id."""

CANCEL_CHANNEL = "rath_run_cancels"
"""The channel of cancels asked of running runs (each payload one run id): what their workers listen for."""

RELEASED = 0.0
"""``lease_expires`` of a lease its worker gave up on shutdown (as on SQLite): the reaper hands the run on
at once and, since no worker was lost, does not count it towards ``MAX_LOST_LEASES``."""


async def changed(conn: asyncpg.Connection, *run_ids: str) -> None:
    """Tell other processes (on commit) that these runs changed."""
    for run_id in dict.fromkeys(run_ids):
        await notify(conn, CHANNEL, run_id)


async def append_events(
    conn: asyncpg.Connection, run_id: str, last_seq: int, events: Sequence[EventSpec], at: float
) -> None:
    """Insert events numbered so the last one gets ``last_seq`` (already allocated on the run row): one statement."""
    if not events:
        return
    first = last_seq - len(events) + 1
    await conn.execute(
        "INSERT INTO run_events (run_id, seq, type, data, created_at) "
        "SELECT $1, s, t, d, $5 FROM unnest($2::int[], $3::text[], $4::text[]) AS e(s, t, d)",
        run_id,
        [first + i for i in range(len(events))],
        [kind for kind, _ in events],
        [dumps(data) for _, data in events],
        at,
    )


def _sets(sets: RunChange, start: int) -> str:
    return "".join(f", {col} = ${start + i}" for i, col in enumerate(sets))


async def _update(
    conn: asyncpg.Connection,
    run_id: str,
    token: int | None,
    sets: RunChange,
    events: Sequence[EventSpec],
    checkpoint: tuple[Any, str | None, list[str]] | None,
    at: float,
) -> int | None:
    """ONE statement (one round trip): update the run row (fenced by ``token`` unless None), append the
    events numbered after its ``last_seq``, take the checkpoint (and NOTIFY on commit). None when no row matched."""
    check_change(sets)
    n = len(events)
    args: list[Any] = [n, at, run_id, [kind for kind, _ in events], [dumps(data) for _, data in events]]
    fence = ""
    if token is not None:
        args.append(token)
        fence = f" AND lease_token = ${len(args)} AND status = 'running'"
    take = ""
    if checkpoint is not None:
        state_json, next_step, pending = checkpoint
        kinds = [kind for kind, _ in events]
        at_event = kinds.index("checkpoint.created") + 1 if "checkpoint.created" in kinds else n  # its seq, of the n
        args += [at_event, state_json, next_step, dumps(pending)]
        k = len(args) - 3
        take = (
            ", c AS (INSERT INTO run_checkpoints (run_id, seq, state, next_step, pending, session_id, created_at) "
            f"SELECT $3, u.last_seq - $1 + ${k}::int, ${k + 1}::text, ${k + 2}::text, ${k + 3}::text, u.ses, $2 FROM u)"
        )
    sql = (
        f"WITH u AS (UPDATE runs SET last_seq = last_seq + $1::int, updated_at = $2{_sets(sets, len(args) + 1)} "
        f"WHERE id = $3{fence} RETURNING last_seq, COALESCE(output_session_id, session_id) AS ses), "
        "e AS (INSERT INTO run_events (run_id, seq, type, data, created_at) "
        "SELECT $3, u.last_seq - $1 + e.ord, e.t, e.d, $2 FROM u, unnest($4::text[], $5::text[]) "
        f"WITH ORDINALITY AS e(t, d, ord)){take} "
        "SELECT last_seq FROM u"
    )
    last_seq = await conn.fetchval(sql, *args, *sets.values())
    if last_seq is None:
        return None
    await notify(conn, CHANNEL, run_id)  # held until the write commits (notify.py)
    return int(last_seq)


async def guarded_update(
    conn: asyncpg.Connection,
    run_id: str,
    token: int,
    sets: RunChange,
    events: Sequence[EventSpec] = (),
    *,
    checkpoint: tuple[Any, str | None, list[str]] | None = None,
    at: float | None = None,
) -> int:
    """Update a run the caller holds the lease of; append events (and a checkpoint). Returns last_seq.

    A stale ``token`` (or a run no longer running) matches nothing: ``LeaseLostError``, nothing written."""
    last_seq = await _update(conn, run_id, token, sets, events, checkpoint, now() if at is None else at)
    if last_seq is None:
        raise LeaseLostError(run_id, token)
    return last_seq


async def lock_held(conn: asyncpg.Connection, run_id: str, token: int) -> None:
    """Lock a run the caller holds the lease of (before touching its effects); ``LeaseLostError`` if it does not."""
    held = await conn.fetchval(
        "SELECT 1 FROM runs WHERE id = $1 AND lease_token = $2 AND status = 'running' FOR UPDATE", run_id, token
    )
    if held is None:
        raise LeaseLostError(run_id, token)


async def plain_update(conn: asyncpg.Connection, run_id: str, sets: RunChange, events: Sequence[EventSpec]) -> int:
    """Update a run nobody holds (service-side changes: cancel, decisions, reconciliation)."""
    last_seq = await _update(conn, run_id, None, sets, events, None, now())
    if last_seq is None:
        raise NotFoundError(f"no run {run_id}")
    return last_seq


async def run_row(conn: asyncpg.Connection, scope: Scope, run_id: str, *, lock: bool = False) -> asyncpg.Record:
    row = await conn.fetchrow(
        "SELECT * FROM runs WHERE id = $1 AND tenant = $2 AND project = $3" + (" FOR UPDATE" if lock else ""),
        run_id, scope.tenant, scope.project,
    )  # fmt: skip
    if row is None:
        raise no_run(run_id, scope.tenant, scope.project)
    return row


async def insert_run(
    conn: asyncpg.Connection, scope: Scope, fields: dict[str, Any], events: Sequence[EventSpec]
) -> str:
    at = now()
    run_id = new_id("run")
    row = {
        "id": run_id,
        "tenant": scope.tenant,
        "project": scope.project,
        "status": "queued",
        "next_at": at,
        "created_at": at,
        "updated_at": at,
        "last_seq": len(events),
        **fields,
    }
    marks = ", ".join(f"${i + 1}" for i in range(len(row)))
    await conn.execute(f"INSERT INTO runs ({', '.join(row)}) VALUES ({marks})", *row.values())
    await append_events(conn, run_id, len(events), events, at)
    await changed(conn, run_id)
    return run_id


async def renew(conn: asyncpg.Connection, leases: Sequence[tuple[str, int]], lease_s: float) -> dict[str, str]:
    """Extend held leases. Returns, for each lease still held, the pending cancel reason ('' = none)."""
    if not leases:
        return {}
    rows = await conn.fetch(
        "UPDATE runs SET lease_expires = $1 FROM unnest($2::text[], $3::bigint[]) AS l(id, token) "
        "WHERE runs.id = l.id AND runs.lease_token = l.token AND runs.status = 'running' "
        "RETURNING runs.id, runs.cancel_requested, runs.cancel_reason",
        now() + lease_s, [run_id for run_id, _ in leases], [token for _, token in leases],
    )  # fmt: skip
    return {r["id"]: (r["cancel_reason"] or "cancelled") if r["cancel_requested"] else "" for r in rows}


async def release(conn: asyncpg.Connection, leases: Sequence[tuple[str, int]]) -> None:
    """Give up held leases (worker shutdown) so that any worker can recover their runs at once."""
    if not leases:
        return
    rows = await conn.fetch(
        "UPDATE runs SET lease_expires = $1 FROM unnest($2::text[], $3::bigint[]) AS l(id, token) "
        "WHERE runs.id = l.id AND runs.lease_token = l.token AND runs.status = 'running' RETURNING runs.id",
        RELEASED, [run_id for run_id, _ in leases], [token for _, token in leases],
    )  # fmt: skip
    await changed(conn, *(r["id"] for r in rows))


async def end_unheld(
    conn: asyncpg.Connection, run_id: str, status: str, reason: str | None, sets: dict[str, Any]
) -> None:
    """End a run no worker holds (its row locked by the caller): expire its pending interrupts, set ``status``."""
    expired = await conn.fetch(
        "UPDATE run_interrupts SET status = 'expired' WHERE run_id = $1 AND status = 'pending' "
        "RETURNING id, created_at",
        run_id,
    )
    ordered = sorted(expired, key=lambda r: (r["created_at"], r["id"]))
    events: list[EventSpec] = [("interrupt.expired", {"interrupt_id": r["id"]}) for r in ordered]
    events.append(("run.state.changed", {"status": status, "reason": reason}))
    await plain_update(conn, run_id, {"status": status, **sets}, events)
