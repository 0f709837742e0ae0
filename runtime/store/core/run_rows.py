"""The run row and its events, written once: the run's update, event numbering, checkpoints.

Every change of a run goes through ``update_run``: one UPDATE of the run row that allocates the sequence
numbers of the events it appends and, for a worker's change, checks the fencing token and that the run
is still ``running``. If the token is stale the UPDATE matches nothing and ``LeaseLostError`` rolls the
whole unit back: a worker that lost its lease can never commit. A change to a run nobody holds (cancel,
decisions, reaping) is the same update without the token.

The two backends keep a checkpoint differently (SQLite on its event's row, in ``cp_`` columns;
PostgreSQL in ``run_checkpoints``) and write differently fast: where lists bind as arrays
(``Dialect.arrays``, PostgreSQL) the row update, its events and its checkpoint are ONE statement
(one round trip); on SQLite, whose statements cost no round trip, an UPDATE, a read back and an
executemany (SQLite buffers a RETURNING's rows in a table of their own: the read back is cheaper).

Locking order on PostgreSQL, so that concurrent writers never deadlock on one run: a write locks the
run's row first (the fenced UPDATE, or ``lock_held`` / ``run_row(lock=True)``) and only then touches
its interrupts and effects. Every write of a run row here tells other processes the run changed
(``changed``: a notice sent on commit where the dialect notifies, which a run store's ``watch`` hears).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from runtime.durable.store import EventSpec, RunChange, dumps
from runtime.durable.store_shared import Scope, check_change, no_run, scope_args
from runtime.errors import LeaseLostError, NotFoundError
from runtime.ids import new_id, now
from runtime.store.core.dialect import Dialect
from runtime.store.core.schema import TYPES, AddColumn, Table
from runtime.store.core.statements import Op, Row, many, none, notice, one, rows, value
from runtime.store.core.tables import POSTGRES as POSTGRES_STEPS
from runtime.store.core.webhooks import NOTIFIED, enqueue

#: The channels a run's change is told on (each payload one run id): every change, and the cancels asked of
#: running runs, which their workers listen for (``runtime/store/postgres/runs.py``'s ``watch``).
CHANNEL = "rath_runs"
CANCEL_CHANNEL = "rath_run_cancels"

#: Where the worker's queries are in ``Scope | None`` (its parameters: ``scope_args``).
IN_SCOPE = "tenant = COALESCE(?, tenant) AND project = COALESCE(?, project)"

#: The columns of an event (SQLite's ``cp_`` columns stay out of event reads).
EVENT_COLUMNS = "run_id, seq, type, data, created_at"

RELEASED = 0.0
"""``lease_expires`` of a lease its worker gave up on shutdown: the reaper hands the run on at once and,
since no worker was lost, does not count it towards ``MAX_LOST_LEASES``."""

#: An event's row, and one that keeps a checkpoint (SQLite). Naming the ``cp_`` columns only where they hold
#: something measured a third cheaper per row than binding them NULL.
_EVENT_ROW = "INSERT INTO run_events (run_id, seq, type, data, created_at) VALUES (?, ?, ?, ?, ?)"
_CHECKPOINT_ROW = (
    "INSERT INTO run_events (run_id, seq, type, data, created_at, cp_state, cp_next_step, cp_pending, "
    "cp_session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: Events as one statement over arrays (PostgreSQL).
_EVENT_ARRAYS = (
    "INSERT INTO run_events (run_id, seq, type, data, created_at) "
    "SELECT ?, e.s, e.t, e.d, ?::double precision FROM unnest(?::int[], ?::text[], ?::text[]) AS e(s, t, d)"
)
#: What SQLite's ``update_run`` reads back of the row it updated (``notify_url``: whether the change is notified).
_AFTER_UPDATE = "SELECT last_seq, notify_url, COALESCE(output_session_id, session_id) FROM runs WHERE id = ?"

Checkpoint = tuple[Any, str | None, list[str]]


def changed(d: Dialect, run_ids: Iterable[str], channel: str = CHANNEL) -> Op[None]:
    """Tell other processes, once this write commits, that these runs changed (where the dialect notifies)."""
    if d.notifies:
        for run_id in run_ids:
            yield notice(channel, run_id)


def append_events(
    d: Dialect,
    run_id: str,
    last_seq: int,
    events: Sequence[EventSpec],
    at: float,
    checkpoint: tuple[int, tuple[str, str | None, str, str | None]] | None = None,
) -> Op[None]:
    """Insert events numbered so the last one gets ``last_seq`` (already allocated on the run row);
    ``checkpoint`` (SQLite): ``(seq, (state, next_step, pending, session_id))`` kept on the event numbered ``seq``."""
    if not events:
        return
    first = last_seq - len(events) + 1
    if d.arrays:
        seqs = list(range(first, last_seq + 1))
        yield none(_EVENT_ARRAYS, run_id, at, seqs, [k for k, _ in events], [dumps(v) for _, v in events])
        return
    found = [(run_id, seq, kind, dumps(data), at) for seq, (kind, data) in enumerate(events, first)]
    if checkpoint is not None:
        seq, fields = checkpoint
        yield none(_CHECKPOINT_ROW, *found.pop(seq - first), *fields)
    if found:
        yield many(_EVENT_ROW, found)


def checkpoint_index(events: Sequence[EventSpec]) -> int:
    """Which of ``events`` (0-based) keeps the checkpoint: its ``checkpoint.created`` event, else the last."""
    kinds = [kind for kind, _ in events]
    return kinds.index("checkpoint.created") if "checkpoint.created" in kinds else len(kinds) - 1


def update_run(
    d: Dialect,
    run_id: str,
    token: int | None,
    sets: RunChange,
    events: Sequence[EventSpec] = (),
    checkpoint: Checkpoint | None = None,
    at: float | None = None,
) -> Op[int]:
    """Update a run, appending events (and a checkpoint); returns its last_seq. ``token``: the lease the caller
    holds, ``None`` for a run nobody holds (service-side changes: cancel, decisions, reaping).

    The checkpoint is kept on its ``checkpoint.created`` event (else on the last of ``events``), with the
    run's session as it is now (what a fork from here starts from). ``at``: the commit's timestamp, when
    the caller derived other values from it (default: now). A stale ``token`` (or a run no longer running)
    matches nothing: ``LeaseLostError``, nothing written (without one, a run that is not there: ``NotFoundError``)."""
    at = now() if at is None else at
    n = len(events)
    if checkpoint is not None and not n:
        raise ValueError("a checkpoint is kept on an event: commit it with its checkpoint.created event")
    if d.arrays:
        found = yield from _one_statement(run_id, token, sets, events, checkpoint, at)
    else:
        fence = () if token is None else (token,)
        updated = yield none(_update_sql(tuple(sets), token is not None), n, at, *sets.values(), run_id, *fence)
        found = (yield one(_AFTER_UPDATE, run_id)) if updated else None
        if found is not None:
            kept = None
            if checkpoint is not None:
                state_json, next_step, pending = checkpoint
                seq = found[0] - n + 1 + checkpoint_index(events)
                kept = (seq, (state_json, next_step, dumps(pending) if pending else "[]", found[2]))
            yield from append_events(d, run_id, found[0], events, at, kept)
    if found is None:
        raise NotFoundError(f"no run {run_id}") if token is None else LeaseLostError(run_id, token)
    yield from _webhook(d, run_id, sets, found[1])
    yield from changed(d, [run_id])
    return int(found[0])


def _webhook(d: Dialect, run_id: str, sets: RunChange, url: str | None) -> Op[None]:
    """A run with a ``notify_url`` (read back by the update itself: no statement more for runs without
    one) moved to a status it hears of gets its notification in this transaction
    (``runtime.store.core.webhooks``). Not ``waiting``: ``park`` settles that once its interrupt is
    written, so that the summary sent names it."""
    status = sets.get("status")
    if url is not None and status in NOTIFIED and status != "waiting":
        yield from enqueue(d, run_id, status, url)


_FENCE = " AND lease_token = ? AND status = 'running'"


@lru_cache(maxsize=256)
def _update_sql(columns: tuple[str, ...], fenced: bool) -> str:
    """SQLite's UPDATE of ``update_run`` setting ``columns`` (checked once per set of columns: a run's
    steps make a handful of different changes, over and over)."""
    check_change(dict.fromkeys(columns))
    cols = "".join(f", {col} = ?" for col in columns)
    return f"UPDATE runs SET last_seq = last_seq + ?, updated_at = ?{cols} WHERE id = ?{_FENCE if fenced else ''}"


def _one_statement(
    run_id: str, token: int | None, sets: RunChange, events: Sequence[EventSpec], cp: Checkpoint | None, at: float
) -> Op[Row | None]:
    """ONE statement: update the run row (fenced by ``token`` unless None), append the events numbered
    after its ``last_seq``, take the checkpoint. The run's ``last_seq`` and ``notify_url``; None when no
    row matched."""
    n = len(events)
    args: list[Any] = [n, at, *sets.values(), run_id]
    if token is not None:
        args.append(token)
    args += [run_id, n, at, [kind for kind, _ in events], [dumps(data) for _, data in events]]
    if cp is not None:
        state_json, next_step, pending = cp
        args += [run_id, n, checkpoint_index(events) + 1, state_json, next_step, dumps(pending), at]
    found: Row | None = yield one(_one_statement_sql(tuple(sets), token is not None, cp is not None), *args)
    return found


@lru_cache(maxsize=256)
def _one_statement_sql(columns: tuple[str, ...], fenced: bool, checkpoint: bool) -> str:
    check_change(dict.fromkeys(columns))
    cols = "".join(f", {col} = ?" for col in columns)
    fence = _FENCE if fenced else ""
    take = (
        ", c AS (INSERT INTO run_checkpoints (run_id, seq, state, next_step, pending, session_id, created_at) "
        "SELECT ?, u.last_seq - ?::int + ?::int, ?::text, ?::text, ?::text, u.ses, ?::double precision FROM u)"
        if checkpoint
        else ""
    )
    return (
        f"WITH u AS (UPDATE runs SET last_seq = last_seq + ?::int, updated_at = ?{cols} "
        f"WHERE id = ?{fence} RETURNING last_seq, COALESCE(output_session_id, session_id) AS ses, notify_url), "
        "e AS (INSERT INTO run_events (run_id, seq, type, data, created_at) "
        "SELECT ?, u.last_seq - ?::int + e.ord, e.t, e.d, ?::double precision FROM u, unnest(?::text[], ?::text[]) "
        f"WITH ORDINALITY AS e(t, d, ord)){take} "
        "SELECT last_seq, notify_url FROM u"
    )


def lock_held(d: Dialect, run_id: str, token: int) -> Op[None]:
    """Where writers run at once, lock a run the caller holds the lease of (before touching its effects);
    ``LeaseLostError`` if it does not. Where they are serialized there is nothing to lock (no statement)."""
    if not d.for_update:
        return
    held = yield value(f"SELECT 1 FROM runs WHERE id = ? AND lease_token = ? AND status = 'running'{d.for_update}",
                       run_id, token)  # fmt: skip
    if held is None:
        raise LeaseLostError(run_id, token)


def run_row(d: Dialect, scope: Scope, run_id: str, *, lock: bool = False) -> Op[Row]:
    """The run's row in ``scope`` (``lock``: locked where writers run at once), else ``no_run``."""
    sql = "SELECT * FROM runs WHERE id = ? AND tenant = ? AND project = ?" + (d.for_update if lock else "")
    row = yield one(sql, run_id, scope.tenant, scope.project)
    if row is None:
        raise no_run(run_id, scope.tenant, scope.project)
    return row


def insert_run(d: Dialect, scope: Scope, fields: dict[str, Any], events: Sequence[EventSpec]) -> Op[str]:
    if d.arrays:
        made = yield from insert_queued_below(d, scope, fields, events, None)
        assert made is not None
        return made
    at = now()
    run_id = new_id("run")
    row = _new_row(scope, run_id, at, fields, len(events))
    yield none(f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", *row.values())
    yield from append_events(d, run_id, len(events), events, at)
    yield from changed(d, [run_id])
    return run_id


def _new_row(scope: Scope, run_id: str, at: float, fields: dict[str, Any], n: int) -> dict[str, Any]:
    return {
        "id": run_id,
        "tenant": scope.tenant,
        "project": scope.project,
        "status": "queued",
        "next_at": at,
        "created_at": at,
        "updated_at": at,
        "last_seq": n,
        **fields,
    }


def insert_queued_below(
    d: Dialect, scope: Scope, fields: dict[str, Any], events: Sequence[EventSpec], limit: int | None
) -> Op[str | None]:
    """Where lists bind as arrays: a new run's row and its events in ONE statement, made only while its scope
    has fewer than ``limit`` queued runs (None: always). The run's id, or None when not made."""
    at = now()
    row = _new_row(scope, new_id("run"), at, fields, len(events))
    args = [*row.values(), *((scope.tenant, scope.project, limit) if limit is not None else ())]
    args += [at, [kind for kind, _ in events], [dumps(data) for _, data in events]]
    found: str | None = yield value(_insert_sql(tuple(row), limit is not None), *args)
    if found is not None:
        yield from changed(d, [found])
    return found


@lru_cache(maxsize=64)
def _insert_sql(columns: tuple[str, ...], below: bool) -> str:
    types = run_column_types()
    values = ", ".join(f"?::{types[col]}" for col in columns)
    within = (
        " WHERE (SELECT COUNT(*) FROM runs WHERE tenant = ? AND project = ? AND status = 'queued') < ?" if below else ""
    )
    return (
        f"WITH r AS (INSERT INTO runs ({', '.join(columns)}) SELECT {values}{within} RETURNING id), "
        "e AS (INSERT INTO run_events (run_id, seq, type, data, created_at) "
        "SELECT r.id, e.ord, e.t, e.d, ?::double precision FROM r, unnest(?::text[], ?::text[]) "
        "WITH ORDINALITY AS e(t, d, ord)) "
        "SELECT id FROM r"
    )


@lru_cache(maxsize=1)
def run_column_types() -> dict[str, str]:
    """PostgreSQL's type of each column of ``runs``, as the tables describe them (what a parameter or an
    array of them is cast to where the statement does not say)."""
    found: dict[str, str] = {}
    for step in POSTGRES_STEPS:
        for change in step.changes:
            if isinstance(change, Table) and change.name == "runs":
                cols = list(change.columns)
            elif isinstance(change, AddColumn) and change.table == "runs":
                cols = [change.column]
            else:
                continue
            for col in cols:
                found[col.name] = TYPES[col.type][1].split(" COLLATE")[0].lower()
    return found


#: The scopes the fair queue's list (``run_scopes``) holds that have no queued run left (``claims.sweep``).
EMPTY_SCOPES = (
    "SELECT tenant, project FROM run_scopes s WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.status = 'queued' "
    "AND r.tenant = s.tenant AND r.project = s.project)"
)


def has_reapable(d: Dialect, scope: Scope | None) -> Op[bool]:
    """Cheap read: is there anything for ``reap`` to do? (For every scope, ``None``: a scope to sweep too.)"""
    found = yield value(
        f"SELECT EXISTS (SELECT 1 FROM runs WHERE status = 'running' AND lease_expires < ? AND {IN_SCOPE}) "
        f"OR EXISTS (SELECT 1 FROM run_interrupts WHERE status = 'pending' AND expires_at < ? AND {IN_SCOPE}) "
        f"OR EXISTS (SELECT 1 FROM runs WHERE deadline < ? AND {IN_SCOPE} "
        "AND status IN ('queued', 'waiting', 'needs_review'))"
        + (f" OR EXISTS ({EMPTY_SCOPES})" if scope is None else ""),
        *(now(), *scope_args(scope)) * 3,
    )
    return bool(found)


def end_unheld(d: Dialect, run_id: str, status: str, reason: str | None, sets: dict[str, Any]) -> Op[None]:
    """End a run no worker holds (queued, waiting or needing review; its row locked by the caller where
    writers run at once): expire its pending interrupts (oldest first), set ``status``."""
    expired: list[Row] = yield rows(
        "UPDATE run_interrupts SET status = 'expired' WHERE run_id = ? AND status = 'pending' RETURNING id, created_at",
        run_id,
    )
    ordered = sorted(expired, key=lambda r: (r["created_at"], r["id"]))
    events: list[EventSpec] = [("interrupt.expired", {"interrupt_id": r["id"]}) for r in ordered]
    events.append(("run.state.changed", {"status": status, "reason": reason}))
    yield from update_run(d, run_id, None, {"status": status, **sets}, events)
