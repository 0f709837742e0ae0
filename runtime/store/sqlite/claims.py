"""Claims on SQLite: which queued runs a worker takes, under workflow concurrency limits, and who holds them.

A claim is one write transaction, and SQLite has one writer at a time (across processes too, by its
file lock), so counting the runs a workflow has running and claiming the next ones cannot race: the
count is taken inside the claim's own transaction. The choice is one query: queued runs are ranked
within their group (workflow, concurrency key) by ``next_at``; a run is claimable while its rank
plus the group's running count stays within the workflow's limit; the claimable ones are taken
earliest first. Workflows without a limit take the plain query (no ranking).

What a limit counts is what the claimer serves (``scope``): ``None``, the ``RunQueue`` every worker
claims through, counts the running runs of the whole store, every tenant/project (CONTRACT: "at most
N of its runs execute at once across every worker of a store"), per concurrency key when the run has
one; a scoped store counts its own scope's. The ready runs are those of ``scope`` (``None``: every scope).

Every claim also records the claiming process (``lease_host``, ``lease_pid``, ``lease_started``),
which ``holders`` lists and ``reap.take_over`` acts on when that process is gone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from runtime.durable.store import EventSpec, Holder, Limits
from runtime.durable.store_shared import Scope, scope_args
from runtime.ids import now
from runtime.store.sqlite.durable import IN_SCOPE, append_events


def _caps(workflows: Sequence[str], limits: Limits) -> tuple[str, list[Any]]:
    """A ``caps(workflow, cap)`` CTE of every asked workflow (cap NULL: no limit) and the counts running
    (``busy``, in the claimer's scope: its two ``IN_SCOPE`` parameters follow ``args``)."""
    rows = ", ".join("(?, ?)" for _ in workflows)
    sql = (
        f"caps(workflow, cap) AS (VALUES {rows}), "
        "busy AS (SELECT workflow, concurrency_key AS ckey, COUNT(*) AS n FROM runs WHERE status = 'running' "
        f"AND {IN_SCOPE} AND workflow IN (SELECT workflow FROM caps WHERE cap IS NOT NULL) "
        "GROUP BY workflow, concurrency_key)"
    )
    args: list[Any] = [v for w in workflows for v in (w, limits.get(w))]
    return sql, args


def _claimable(
    scope: Scope | None, at: float, limit: int, workflows: Sequence[str], limits: Limits
) -> tuple[str, list[Any]]:
    """A query of the ids of the runs to claim, earliest first, that every workflow's limit lets run."""
    marks = ", ".join("?" for _ in workflows)
    where = f"status = 'queued' AND next_at <= ? AND {IN_SCOPE} AND workflow IN ({marks})"
    here = list(scope_args(scope))
    if not any(w in limits for w in workflows):
        return f"SELECT id FROM runs WHERE {where} ORDER BY next_at, id LIMIT ?", [at, *here, *workflows, limit]
    caps, args = _caps(workflows, limits)
    sql = (
        f"WITH {caps}, ready AS (SELECT id, workflow, concurrency_key AS ckey, next_at, ROW_NUMBER() OVER "
        f"(PARTITION BY workflow, concurrency_key ORDER BY next_at, id) AS place FROM runs WHERE {where}) "
        "SELECT r.id FROM ready r JOIN caps c ON c.workflow = r.workflow "
        "LEFT JOIN busy b ON b.workflow = r.workflow AND b.ckey IS r.ckey "
        "WHERE c.cap IS NULL OR r.place + COALESCE(b.n, 0) <= c.cap ORDER BY r.next_at, r.id LIMIT ?"
    )
    return sql, [*args, *here, at, *here, *workflows, limit]


def claim(
    conn: sqlite3.Connection,
    scope: Scope | None,
    owner: str,
    lease_s: float,
    limit: int,
    workflows: Sequence[str],
    holder: Holder | None = None,
    limits: Limits | None = None,
) -> list[sqlite3.Row]:
    """Take up to ``limit`` ready runs within ``limits``: each gets a new, higher fencing token and a lease.
    One statement: the choice is a subquery of the UPDATE."""
    if limit <= 0 or not workflows:
        return []
    at = now()
    chosen, args = _claimable(scope, at, limit, workflows, limits or {})
    host, pid, started = (holder.host, holder.pid, holder.started) if holder is not None else (None, None, None)
    rows = conn.execute(
        "UPDATE runs SET status = 'running', lease_owner = ?, lease_token = lease_token + 1, lease_expires = ?, "
        "lease_host = ?, lease_pid = ?, lease_started = ?, updated_at = ?, last_seq = last_seq + 2 "
        f"WHERE id IN ({chosen}) RETURNING *",
        (owner, at + lease_s, host, pid, started, at, *args),
    ).fetchall()
    rows.sort(key=lambda r: (r["next_at"], r["id"]))  # RETURNING keeps no order
    for row in rows:
        events: list[EventSpec] = [
            ("run.state.changed", {"status": "running", "worker": owner, "token": row["lease_token"]}),
            ("step.started", {"step": row["step"], "visit": row["visit"], "attempt": row["attempt"]}),
        ]
        append_events(conn, row["id"], row["last_seq"], events, at)
    return rows


def next_ready(conn: sqlite3.Connection, scope: Scope | None, workflows: Sequence[str], limits: Limits) -> float | None:
    """The earliest ``next_at`` of a queued run of these workflows whose group has a free slot (None: none)."""
    if not workflows:
        return None
    marks = ", ".join("?" for _ in workflows)
    here = scope_args(scope)
    where = (
        "r.status = 'queued' AND r.tenant = COALESCE(?, r.tenant) AND r.project = COALESCE(?, r.project) "
        f"AND r.workflow IN ({marks})"
    )
    if not any(w in limits for w in workflows):
        row = conn.execute(f"SELECT MIN(next_at) FROM runs r WHERE {where}", (*here, *workflows)).fetchone()
    else:
        caps, args = _caps(workflows, limits)
        row = conn.execute(
            f"WITH {caps} SELECT MIN(r.next_at) FROM runs r JOIN caps c ON c.workflow = r.workflow "
            "LEFT JOIN busy b ON b.workflow = r.workflow AND b.ckey IS r.concurrency_key "
            f"WHERE {where} AND (c.cap IS NULL OR COALESCE(b.n, 0) < c.cap)",
            (*args, *here, *here, *workflows),
        ).fetchone()
    return None if row[0] is None else float(row[0])


def holders(conn: sqlite3.Connection, scope: Scope | None, host: str) -> list[tuple[int, int]]:
    """``(pid, started)`` of the processes of ``host`` that hold running runs of this scope (``None``: any)."""
    rows = conn.execute(
        "SELECT DISTINCT lease_pid, lease_started FROM runs WHERE status = 'running' AND lease_host = ? "
        f"AND {IN_SCOPE} AND lease_pid IS NOT NULL",
        (host, *scope_args(scope)),
    )
    return [(int(r[0]), int(r[1])) for r in rows]
