"""Claims on PostgreSQL: which queued runs a worker takes, under workflow concurrency limits, and who holds them.

Several processes claim at once here. Runs of workflows without a limit are taken as before: one
``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED)``, so claimers pass each other by.

A workflow with a limit needs its running count and its claim to be one decision: two claimers
that each counted one free slot would take two runs. So a claim of limited workflows first takes a
transaction-scoped advisory lock per workflow (``pg_try_advisory_xact_lock``, held to COMMIT), and
only then counts: under READ COMMITTED each statement sees everything committed before it, so the
claimer that got the lock after another sees that one's claims, and PostgreSQL makes a commit
visible before it releases the committer's locks. It *tries* the lock and never waits for it: a
claim shares its transaction with other writes (group commit), and waiting there for a lock while
holding their row locks could deadlock with a batch that holds the advisory lock and waits for
those rows. A claimer that misses the lock takes none of that workflow's runs this time; the
holder commits in milliseconds and the next poll or notification finds the slot. The choice itself
ranks queued runs within their group (workflow, concurrency key) by ``next_at`` and takes those
whose rank plus the group's running count fits the limit, earliest first, then locks them
``FOR UPDATE SKIP LOCKED`` (a run being cancelled at that moment is simply left for later).

What a limit counts is what the claimer serves (``scope``): ``None``, the ``RunQueue`` every worker
claims through, counts the running runs of the whole store, every tenant/project (CONTRACT: "at most
N of its runs execute at once across every worker of a store"), per concurrency key when the run has
one; a scoped store counts its own scope's. So the lock is the workflow's, one for the whole store
(not per scope): a claimer of any scope serialises with every other claimer of that workflow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from runtime.durable.store import EventSpec, Holder, Limits
from runtime.durable.store_shared import Scope, scope_args
from runtime.ids import now
from runtime.store.postgres.durable import append_events, changed

_QUEUED = (
    "status = 'queued' AND next_at <= $1 AND tenant = COALESCE($2, tenant) AND project = COALESCE($3, project) "
    "AND workflow = ANY($4::text[])"
)


def _busy(tenant: int, project: int, workflows: int, caps: int) -> str:
    """CTEs ``busy`` (running runs per group of these workflows, in the claimer's scope: NULL tenant and
    project are the whole store) and ``caps`` (workflow, limit), by placeholder."""
    return (
        "busy AS (SELECT workflow, concurrency_key AS ckey, COUNT(*) AS n FROM runs WHERE status = 'running' "
        f"AND tenant = COALESCE(${tenant}::text, tenant) AND project = COALESCE(${project}::text, project) "
        f"AND workflow = ANY(${workflows}::text[]) "
        "GROUP BY workflow, concurrency_key), "
        f"caps AS (SELECT * FROM unnest(${workflows}::text[], ${caps}::int[]) AS c(workflow, cap))"
    )


async def _free(
    conn: asyncpg.Connection, scope: Scope | None, at: float, limit: int, workflows: list[str]
) -> list[Any]:
    """Up to ``limit`` ready runs of workflows without a limit, locked (others' locked rows skipped)."""
    if not workflows:
        return []
    sql = f"SELECT id, next_at FROM runs WHERE {_QUEUED} ORDER BY next_at, id LIMIT $5 FOR UPDATE SKIP LOCKED"
    return list(await conn.fetch(sql, at, *scope_args(scope), workflows, limit))


async def _locked_workflows(conn: asyncpg.Connection, workflows: list[str]) -> list[str]:
    """Of these limited workflows, those whose claim lock this transaction got (tried, never waited for).
    One lock per workflow in the whole store, whatever the claimer's scope (see the module's note)."""
    keys = [f"rath-concurrency/{w}" for w in workflows]
    got = await conn.fetch(
        "SELECT w, pg_try_advisory_xact_lock(hashtextextended(k, 0)) AS ok "
        "FROM unnest($1::text[], $2::text[]) AS l(w, k) ORDER BY k",
        workflows, keys,
    )  # fmt: skip
    return [r["w"] for r in got if r["ok"]]


async def _limited(
    conn: asyncpg.Connection, scope: Scope | None, at: float, limit: int, workflows: list[str], limits: Limits
) -> list[Any]:
    """Up to ``limit`` ready runs of limited workflows that their limits let run, locked."""
    mine = await _locked_workflows(conn, workflows) if workflows else []
    if not mine:
        return []
    ids = await conn.fetch(
        f"WITH {_busy(2, 3, 4, 5)}, ready AS (SELECT id, workflow, concurrency_key AS ckey, next_at, ROW_NUMBER() OVER "
        f"(PARTITION BY workflow, concurrency_key ORDER BY next_at, id) AS place FROM runs WHERE {_QUEUED}) "
        "SELECT r.id FROM ready r JOIN caps c ON c.workflow = r.workflow LEFT JOIN busy b ON b.workflow = r.workflow "
        "AND b.ckey IS NOT DISTINCT FROM r.ckey WHERE r.place + COALESCE(b.n, 0) <= c.cap "
        "ORDER BY r.next_at, r.id LIMIT $6",
        at, *scope_args(scope), mine, [limits[w] for w in mine], limit,
    )  # fmt: skip
    if not ids:
        return []
    return list(
        await conn.fetch(
            "SELECT id, next_at FROM runs WHERE id = ANY($1::text[]) AND status = 'queued' AND next_at <= $2 "
            "ORDER BY next_at, id FOR UPDATE SKIP LOCKED",
            [r["id"] for r in ids],
            at,
        )
    )


async def claim(
    conn: asyncpg.Connection,
    scope: Scope | None,
    owner: str,
    lease_s: float,
    limit: int,
    workflows: Sequence[str],
    holder: Holder | None = None,
    limits: Limits | None = None,
) -> list[asyncpg.Record]:
    """Take up to ``limit`` ready runs within ``limits``: each gets a new, higher fencing token and a lease.
    Earliest ``next_at`` first."""
    if limit <= 0 or not workflows:
        return []
    limits = limits or {}
    at = now()
    limited = sorted({w for w in workflows if w in limits})
    picked = await _free(conn, scope, at, limit, [w for w in workflows if w not in limits])
    picked += await _limited(conn, scope, at, limit, limited, limits)
    picked.sort(key=lambda r: (r["next_at"], r["id"]))
    ids = [r["id"] for r in picked[:limit]]  # rows locked but not taken stay queued (unlocked at commit)
    if not ids:
        return []
    host, pid, started = (holder.host, holder.pid, holder.started) if holder is not None else (None, None, None)
    rows = await conn.fetch(
        "UPDATE runs SET status = 'running', lease_owner = $1, lease_token = lease_token + 1, lease_expires = $2, "
        "lease_host = $3, lease_pid = $4, lease_started = $5, updated_at = $6, last_seq = last_seq + 2 "
        "WHERE id = ANY($7::text[]) RETURNING *",
        owner, at + lease_s, host, pid, started, at, ids,
    )  # fmt: skip
    rows.sort(key=lambda r: (r["next_at"], r["id"]))  # RETURNING keeps no order
    for row in rows:
        events: list[EventSpec] = [
            ("run.state.changed", {"status": "running", "worker": owner, "token": row["lease_token"]}),
            ("step.started", {"step": row["step"], "visit": row["visit"], "attempt": row["attempt"]}),
        ]
        await append_events(conn, row["id"], row["last_seq"], events, at)
    await changed(conn, *(r["id"] for r in rows))
    return list(rows)


async def next_ready(
    conn: asyncpg.Connection, scope: Scope | None, workflows: Sequence[str], limits: Limits
) -> float | None:
    """The earliest ``next_at`` of a queued run of these workflows whose group has a free slot (None: none)."""
    if not workflows:
        return None
    names = list(workflows)
    if not any(w in limits for w in names):
        value = await conn.fetchval(
            "SELECT MIN(next_at) FROM runs WHERE status = 'queued' AND tenant = COALESCE($1, tenant) "
            "AND project = COALESCE($2, project) AND workflow = ANY($3::text[])",
            *scope_args(scope), names,
        )  # fmt: skip
    else:
        value = await conn.fetchval(
            f"WITH {_busy(1, 2, 3, 4)} SELECT MIN(r.next_at) FROM runs r JOIN caps c ON c.workflow = r.workflow "
            "LEFT JOIN busy b ON b.workflow = r.workflow AND b.ckey IS NOT DISTINCT FROM r.concurrency_key "
            "WHERE r.status = 'queued' AND r.tenant = COALESCE($1, r.tenant) AND r.project = COALESCE($2, r.project) "
            "AND r.workflow = ANY($3::text[]) AND (c.cap IS NULL OR COALESCE(b.n, 0) < c.cap)",
            *scope_args(scope), names, [limits.get(w) for w in names],
        )  # fmt: skip
    return None if value is None else float(value)


async def holders(conn: asyncpg.Connection, scope: Scope | None, host: str) -> list[tuple[int, int]]:
    """``(pid, started)`` of the processes of ``host`` that hold running runs of this scope (``None``: any)."""
    rows = await conn.fetch(
        "SELECT DISTINCT lease_pid, lease_started FROM runs WHERE status = 'running' AND lease_host = $1 "
        "AND tenant = COALESCE($2, tenant) AND project = COALESCE($3, project) AND lease_pid IS NOT NULL",
        host, *scope_args(scope),
    )  # fmt: skip
    return [(int(r[0]), int(r[1])) for r in rows]
