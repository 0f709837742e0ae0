"""Claims: which queued runs a worker takes, under workflow concurrency limits, and who holds them.

The choice ranks queued runs within their group (workflow, concurrency key) by ``priority`` (highest
first), then ``next_at``; a run is claimable while its rank plus the group's running count stays within
the workflow's limit; the claimable ones are taken in that order (``ORDER``; index ``runs_priority``).
Workflows without a limit take the plain query (no ranking).
Each claimed run gets a new, higher fencing token and a lease, and two events.

Where writers are serialized (SQLite: one writer at a time, across processes too, by its file lock)
counting and claiming cannot race: the count is taken inside the claim's own transaction, and the
choice is a subquery of the one UPDATE. Where several processes claim at once (PostgreSQL, the
dialect's ``skip_locked``), runs of workflows without a limit are locked ``FOR UPDATE SKIP LOCKED``
so claimers pass each other by. A workflow with a limit needs its running count and its claim to be
one decision: a claim of limited workflows first *tries* a transaction-scoped advisory lock per
workflow (held to COMMIT, never waited for: a claim shares its transaction with other writes, and
waiting there while holding their row locks could deadlock) and only then counts; under READ
COMMITTED it sees every claim committed before. A claimer that misses the lock takes none of that
workflow's runs this time; the holder commits in milliseconds and the next poll finds the slot.

What a limit counts is what the claimer serves (``scope``): ``None``, the ``RunQueue`` every worker
claims through, counts the running runs of the whole store, every tenant/project (CONTRACT: "at most
N of its runs execute at once across every worker of a store"), per concurrency key when the run has
one; a scoped store counts its own scope's. So the lock is the workflow's, one for the whole store.

Every claim also records the claiming process (``lease_host``, ``lease_pid``, ``lease_started``),
which ``holders`` lists and ``reap.take_over`` acts on when that process is gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.durable.store import ClaimOrder, EventSpec, Limits
from runtime.durable.store_shared import Scope, scope_args
from runtime.ids import now
from runtime.store.core.dialect import Dialect
from runtime.store.core.run_rows import EMPTY_SCOPES, IN_SCOPE, append_events, changed
from runtime.store.core.statements import Op, Row, rows, value
from runtime.store.core.tables.durable import SCOPE_LOCK

ORDER = "priority DESC, next_at, id"
"""The order runs are claimed in: the highest priority first, then the earliest ready."""

_CLAIM = (
    "UPDATE runs SET status = 'running', lease_owner = ?, lease_token = lease_token + 1, lease_expires = ?, "
    "lease_host = ?, lease_pid = ?, lease_started = ?, updated_at = ?, last_seq = last_seq + 2 "
    "WHERE id{within} RETURNING *"
)


def _caps(d: Dialect, workflows: Sequence[str], limits: Limits) -> tuple[str, list[Any]]:
    """A ``caps(workflow, cap)`` CTE of every asked workflow (cap NULL: no limit) and the counts running
    (``busy``, in the claimer's scope: its two ``IN_SCOPE`` parameters follow ``args``)."""
    values = ", ".join("(CAST(? AS TEXT), CAST(? AS INTEGER))" for _ in workflows)
    sql = (
        f"caps(workflow, cap) AS (VALUES {values}), "
        "busy AS (SELECT workflow, concurrency_key AS ckey, COUNT(*) AS n FROM runs WHERE status = 'running' "
        f"AND {IN_SCOPE} AND workflow IN (SELECT workflow FROM caps WHERE cap IS NOT NULL) "
        "GROUP BY workflow, concurrency_key)"
    )
    return sql, [v for w in workflows for v in (w, limits.get(w))]


#: Fair claiming across tenants/projects (the queue's claims, serving every scope): a scope's runs come in
#: the order of how many runs it has running now, fewest first, so a scope with a backlog of thousands
#: holding every slot yields the next free one to another scope's single run (``served``: per scope, the
#: running runs; few, as many as the slots of the fleet). Within a scope, and between scopes as busy, ``ORDER``.
_SERVED = (
    "served(st, sp, n) AS (SELECT tenant, project, COUNT(*) FROM runs WHERE status = 'running' "
    "GROUP BY tenant, project)"
)
_BY_SERVED = " LEFT JOIN served ON served.st = runs.tenant AND served.sp = runs.project"

#: A scope's running runs (its place in the fair order), counted through ``runs_fair``.
_BUSY = "(SELECT COUNT(*) FROM runs b WHERE b.status = 'running' AND b.tenant = s.tenant AND b.project = s.project)"

#: A scope's head: its first ready runs in ``ORDER`` (through ``runs_fair``), at most as many as are claimed.
_HEAD = (
    "SELECT id, priority, next_at FROM runs{indexed} WHERE status = 'queued' AND tenant = s.tenant AND "
    "project = s.project AND next_at <= ? AND workflow{within} ORDER BY priority DESC, next_at, id LIMIT {limit}"
)


def _heads(d: Dialect, at: float, limit: int, workflows: Sequence[str]) -> tuple[str, list[Any]]:
    """A query of ``(id, priority, next_at, fairness)`` of the head of every scope with ready runs, in the
    fair order. The ``limit`` first of them are the ``limit`` first of all ready runs in that order, as a
    scope gives at most ``limit`` of them. The scopes are the rows of ``run_scopes`` (every scope with
    queued runs, and maybe a few left with none until the reaper's ``sweep``: their heads are empty), so
    finding them never steps over ``runs_fair``'s entries of runs claimed since the last vacuum. Where claimers run at
    once each head's rows are locked as they are read, rows another claimer holds skipped (PostgreSQL: a
    LATERAL subquery); SQLite, without LATERAL, reads a head as the ids ``IN`` a correlated subquery, each
    one a lookup of the primary key."""
    within, names = d.in_list(workflows)
    head = _HEAD.format(indexed=d.indexed_by("runs_fair"), within=within, limit=int(limit))
    if d.skip_locked:
        heads = f"JOIN LATERAL ({head}{d.skip_locked}) h ON TRUE"
    else:
        heads = f"JOIN runs h ON h.id IN (SELECT id FROM ({head}))"
    # the limits as literals (a handful of texts, one per limit asked): PostgreSQL's plan cache then keeps a
    # generic plan of the query; with the limits bound it planned every claim afresh (0.3 ms against 0.12-0.16)
    sql = (
        f"SELECT h.id, h.priority, h.next_at, {_BUSY} AS fairness FROM run_scopes s {heads} "
        f"ORDER BY fairness, h.priority DESC, h.next_at, h.id LIMIT {int(limit)}"
    )
    return sql, [at, *names]


def _own(d: Dialect, scope: Scope, at: float, workflows: Sequence[str]) -> tuple[str, list[Any]]:
    """The ready runs of one scope (a scope's own claims, the plain order): a condition ``runs_fair`` serves,
    tenant and project equal to values (``IN_SCOPE``'s ``COALESCE`` would leave SQLite sorting the queue)."""
    within, names = d.in_list(workflows)
    own = f"status = 'queued' AND tenant = ? AND project = ? AND next_at <= ? AND workflow{within}"
    return own, [scope.tenant, scope.project, at, *names]


def _ranked(
    d: Dialect, scope: Scope | None, at: float, limit: int, workflows: Sequence[str], limits: Limits
) -> tuple[str, list[Any]]:
    """A query of the ids of the runs to claim, earliest first, that every workflow's limit lets run."""
    within, names = d.in_list(workflows)
    where = f"status = 'queued' AND next_at <= ? AND {IN_SCOPE} AND workflow{within}"
    here = scope_args(scope)
    fair = scope is None
    if not any(w in limits for w in workflows):
        if scope is None:  # fair
            sql, args = _heads(d, at, limit, workflows)
            return f"SELECT id FROM ({sql}) fair", args
        own, args = _own(d, scope, at, workflows)
        plain = f"SELECT id FROM runs{d.indexed_by('runs_fair')} WHERE {own} ORDER BY {ORDER} LIMIT ?{d.skip_locked}"
        return plain, [*args, limit]
    caps, args = _caps(d, workflows, limits)
    sql = (
        f"WITH {caps}, {_SERVED}, ready AS (SELECT id, workflow, concurrency_key AS ckey, next_at, priority, "
        f"{'COALESCE(n, 0)' if fair else '0'} AS fairness, ROW_NUMBER() OVER "
        f"(PARTITION BY workflow, concurrency_key ORDER BY {ORDER}) AS place FROM runs{_BY_SERVED} WHERE {where}) "
        "SELECT r.id FROM ready r JOIN caps c ON c.workflow = r.workflow "
        "LEFT JOIN busy b ON b.workflow = r.workflow AND b.ckey IS NOT DISTINCT FROM r.ckey "
        "WHERE c.cap IS NULL OR r.place + COALESCE(b.n, 0) <= c.cap "
        "ORDER BY r.fairness, r.priority DESC, r.next_at, r.id LIMIT ?"
    )
    return sql, [*args, *here, at, *here, *names, limit]


def _locked(
    d: Dialect, scope: Scope | None, at: float, limit: int, workflows: Sequence[str], limits: Limits
) -> Op[list[str]]:
    """Where claimers run at once: the ids to claim, each row locked (rows others hold skipped)."""
    picked: list[Row] = []
    # the columns picked: ``fairness`` is what fair claiming orders by first (``_SERVED``; 0 for a scope's own claims)
    fair = scope is None
    picks = f"WITH {_SERVED} SELECT id, next_at, priority, {'COALESCE(n, 0)' if fair else '0'} AS fairness FROM runs"
    picks += _BY_SERVED
    first = "fairness, " if fair else ""
    free = [w for w in workflows if w not in limits]
    if free and fair:
        sql, args = _heads(d, at, limit, free)
        picked += yield rows(sql, *args)
    elif free and scope is not None:
        own, args = _own(d, scope, at, free)
        plain = f"SELECT id, next_at, priority, 0 AS fairness FROM runs WHERE {own} ORDER BY {ORDER} LIMIT ?"
        picked += yield rows(f"{plain}{d.skip_locked}", *args, limit)
    limited = sorted({w for w in workflows if w in limits})
    if limited:
        got = yield rows(  # one lock per workflow in the whole store, tried, never waited for
            "SELECT w, pg_try_advisory_xact_lock(hashtextextended(k, 0)) AS ok "
            "FROM unnest(?::text[], ?::text[]) AS l(w, k) ORDER BY k",
            limited, [f"rath-concurrency/{w}" for w in limited],
        )  # fmt: skip
        mine = [r["w"] for r in got if r["ok"]]
        if mine:
            sql, args = _ranked(d, scope, at, limit, mine, limits)
            ids = [r["id"] for r in (yield rows(sql, *args))]
            if ids:
                within, listed = d.in_list(ids)
                picked += yield rows(
                    f"{picks} WHERE id{within} AND status = 'queued' AND next_at <= ? "
                    f"ORDER BY {first}{ORDER}{d.skip_locked_runs}",
                    *listed, at,
                )  # fmt: skip
    picked.sort(key=lambda r: (int(r["fairness"]), *_in_order(r)))
    return [r["id"] for r in picked[:limit]]  # rows locked but not taken stay queued (unlocked at commit)


def _in_order(row: Row) -> tuple[int, float, str]:
    """``ORDER`` in Python: for rows picked by two queries, and RETURNING's rows."""
    return -int(row["priority"]), float(row["next_at"]), str(row["id"])


def claim(d: Dialect, scope: Scope | None, order: ClaimOrder) -> Op[list[Row]]:
    """Take up to ``order.limit`` ready runs within its limits: each gets a new, higher fencing token and a
    lease. Highest priority first, then earliest ``next_at``. One statement, the choice a subquery of the
    UPDATE (its rows locked as read, skipping others' where claimers run at once), unless workflows with a
    limit are asked where claimers run at once: their locks are tried first (``_locked``)."""
    owner, limit, workflows, limits, holder = order.owner, order.limit, order.workflows, order.limits, order.holder
    if limit <= 0 or not workflows:
        return []
    at = now()
    if d.skip_locked and any(w in (limits or {}) for w in workflows):
        ids = yield from _locked(d, scope, at, limit, workflows, limits or {})
        if not ids:
            return []
        within, args = d.in_list(ids)
    else:
        chosen, chosen_args = _ranked(d, scope, at, limit, workflows, limits or {})
        within, args = f" IN ({chosen})", tuple(chosen_args)
    host, pid, started = (holder.host, holder.pid, holder.started) if holder is not None else (None, None, None)
    found: list[Row] = yield rows(
        _CLAIM.format(within=within), owner, at + order.lease_s, host, pid, started, at, *args
    )
    found = sorted(found, key=_in_order)  # RETURNING keeps no order
    for row in found:
        events: list[EventSpec] = [
            ("run.state.changed", {"status": "running", "worker": owner, "token": row["lease_token"]}),
            ("step.started", {"step": row["step"], "visit": row["visit"], "attempt": row["attempt"]}),
        ]
        yield from append_events(d, row["id"], row["last_seq"], events, at)
    yield from changed(d, [row["id"] for row in found])
    return found


def sweep(d: Dialect) -> Op[int]:
    """Drop the scopes of ``run_scopes`` left with no queued run (how many): the store-wide reaper's, once
    a second or so while ``has_reapable`` sees one (never in a claim: no statement more there). Where
    writers are serialized nothing can become queued meanwhile. Where they run at once, a run becoming
    queued holds its scope's shared lock to its commit (the trigger of ``tables.durable``): a scope is
    dropped only when its exclusive lock is had at once (tried, never waited for: held to COMMIT), and
    after a second look under that lock, in a statement of its own (READ COMMITTED: it sees every run
    committed before)."""
    if not d.skip_locked:
        return len((yield rows(f"DELETE FROM run_scopes WHERE (tenant, project) IN ({EMPTY_SCOPES}) RETURNING tenant")))
    lock = SCOPE_LOCK.format(t="e.tenant", p="e.project")
    locked = yield rows(
        f"SELECT tenant, project FROM ({EMPTY_SCOPES} OFFSET 0) e WHERE pg_try_advisory_xact_lock({lock})"
    )
    if not locked:
        return 0
    gone = yield rows(
        f"DELETE FROM run_scopes WHERE (tenant, project) IN (SELECT * FROM unnest(?::text[], ?::text[])) "
        f"AND (tenant, project) IN ({EMPTY_SCOPES}) RETURNING tenant",
        [r["tenant"] for r in locked], [r["project"] for r in locked],
    )  # fmt: skip
    return len(gone)


def next_ready(d: Dialect, scope: Scope | None, workflows: Sequence[str], limits: Limits) -> Op[float | None]:
    """The earliest ``next_at`` of a queued run of these workflows whose group has a free slot (None: none)."""
    if not workflows:
        return None
    within, names = d.in_list(workflows)
    here = scope_args(scope)
    where = (
        "r.status = 'queued' AND r.tenant = COALESCE(?, r.tenant) AND r.project = COALESCE(?, r.project) "
        f"AND r.workflow{within}"
    )
    if not any(w in limits for w in workflows):
        found = yield value(f"SELECT MIN(next_at) FROM runs r WHERE {where}", *here, *names)
    else:
        caps, args = _caps(d, workflows, limits)
        found = yield value(
            f"WITH {caps} SELECT MIN(r.next_at) FROM runs r JOIN caps c ON c.workflow = r.workflow "
            "LEFT JOIN busy b ON b.workflow = r.workflow AND b.ckey IS NOT DISTINCT FROM r.concurrency_key "
            f"WHERE {where} AND (c.cap IS NULL OR COALESCE(b.n, 0) < c.cap)",
            *args, *here, *here, *names,
        )  # fmt: skip
    return None if found is None else float(found)


def holders(d: Dialect, scope: Scope | None, host: str) -> Op[list[tuple[int, int]]]:
    """``(pid, started)`` of the processes of ``host`` that hold running runs of this scope (``None``: any)."""
    found = yield rows(
        "SELECT DISTINCT lease_pid, lease_started FROM runs WHERE status = 'running' AND lease_host = ? "
        f"AND {IN_SCOPE} AND lease_pid IS NOT NULL",
        host, *scope_args(scope),
    )  # fmt: skip
    return [(int(r[0]), int(r[1])) for r in found]
