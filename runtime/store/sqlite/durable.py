"""SQL of the durable layer on SQLite: the pieces ``SQLiteRunStore`` (``runs.py``) composes, each run on a
connection inside ``db.write``/``db.read``.

Every change a worker makes goes through ``guarded_update``: one UPDATE of the run row that checks
the fencing token and that the run is still ``running``, and allocates the sequence numbers of
the events it appends. If the token is stale the UPDATE matches nothing and ``LeaseLostError``
rolls the whole unit back: a worker that lost its lease can never commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from runtime.durable.store import EventSpec, RunChange, dumps
from runtime.durable.store_shared import Scope, check_change, no_run
from runtime.errors import LeaseLostError, NotFoundError
from runtime.ids import new_id, now

#: Where the worker's queries are in ``Scope | None`` (its parameters: ``scope_args``).
IN_SCOPE = "tenant = COALESCE(?, tenant) AND project = COALESCE(?, project)"


#: The columns of an event (a checkpoint's ``cp_`` columns stay out of event reads).
EVENT_COLUMNS = "run_id, seq, type, data, created_at"


#: An event's row, and one that keeps a checkpoint. (Naming the ``cp_`` columns only where they hold something
#: measured a third cheaper per row than binding them NULL.)
_EVENT_ROW = "INSERT INTO run_events (run_id, seq, type, data, created_at) VALUES (?, ?, ?, ?, ?)"
_CHECKPOINT_ROW = (
    "INSERT INTO run_events (run_id, seq, type, data, created_at, cp_state, cp_next_step, cp_pending, "
    "cp_session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def append_events(
    conn: sqlite3.Connection,
    run_id: str,
    last_seq: int,
    events: Sequence[EventSpec],
    at: float,
    checkpoint: tuple[int, tuple[str, str | None, str, str | None]] | None = None,
) -> None:
    """Insert events numbered so the last one gets ``last_seq`` (already allocated on the run row);
    ``checkpoint``: ``(seq, (state, next_step, pending, session_id))`` kept on the event numbered ``seq``."""
    first = last_seq - len(events) + 1
    rows = [(run_id, seq, kind, dumps(data), at) for seq, (kind, data) in enumerate(events, first)]
    if checkpoint is not None:
        seq, fields = checkpoint
        conn.execute(_CHECKPOINT_ROW, (*rows.pop(seq - first), *fields))
    conn.executemany(_EVENT_ROW, rows)


def guarded_update(
    conn: sqlite3.Connection,
    run_id: str,
    token: int,
    sets: RunChange,
    events: Sequence[EventSpec] = (),
    *,
    checkpoint: tuple[Any, str | None, list[str]] | None = None,
    at: float | None = None,
) -> int:
    """Update a run the caller holds the lease of; append events (and a checkpoint). Returns last_seq.

    The checkpoint is kept on its ``checkpoint.created`` event (else on the last of ``events``), with the
    run's session as it is now (what a fork from here starts from). ``at``: the commit's timestamp, when
    the caller derived other values from it (default: now)."""
    at = now() if at is None else at
    n = len(events)
    if checkpoint is not None and not n:
        raise ValueError("a checkpoint is kept on an event: commit it with its checkpoint.created event")
    # No RETURNING: SQLite buffers returned rows in a table of their own; a read of the row after it is cheaper.
    if not conn.execute(_guarded_sql(tuple(sets)), (n, at, *sets.values(), run_id, token)).rowcount:
        raise LeaseLostError(run_id, token)
    row = conn.execute(_AFTER_UPDATE, (run_id,)).fetchone()
    last_seq = int(row[0])
    kept = None
    if checkpoint is not None:
        state_json, next_step, pending = checkpoint
        kinds = [kind for kind, _ in events]
        seq = last_seq - n + 1 + kinds.index("checkpoint.created") if "checkpoint.created" in kinds else last_seq
        kept = (seq, (state_json, next_step, dumps(pending) if pending else "[]", row[1]))
    if n:
        append_events(conn, run_id, last_seq, events, at, kept)
    return last_seq


@lru_cache(maxsize=256)
def _guarded_sql(columns: tuple[str, ...]) -> str:
    """The UPDATE of ``guarded_update`` setting ``columns`` (checked once per set of columns: a run's
    steps make a handful of different changes, over and over)."""
    check_change(dict.fromkeys(columns))
    cols = "".join(f", {col} = ?" for col in columns)
    return (
        f"UPDATE runs SET last_seq = last_seq + ?, updated_at = ?{cols} "
        "WHERE id = ? AND lease_token = ? AND status = 'running'"
    )


#: What ``guarded_update`` reads back of the row it updated.
_AFTER_UPDATE = "SELECT last_seq, COALESCE(output_session_id, session_id) FROM runs WHERE id = ?"


def plain_update(conn: sqlite3.Connection, run_id: str, sets: RunChange, events: Sequence[EventSpec]) -> int:
    """Update a run nobody holds (service-side changes: cancel, decisions, reconciliation)."""
    check_change(sets)
    at = now()
    cols = "".join(f", {col} = ?" for col in sets)
    row = conn.execute(
        f"UPDATE runs SET last_seq = last_seq + ?, updated_at = ?{cols} WHERE id = ? RETURNING last_seq",
        (len(events), at, *sets.values(), run_id),
    ).fetchone()
    if row is None:
        raise NotFoundError(f"no run {run_id}")
    append_events(conn, run_id, int(row[0]), events, at)
    return int(row[0])


def run_row(conn: sqlite3.Connection, scope: Scope, run_id: str) -> sqlite3.Row:
    row = conn.execute(
        "SELECT * FROM runs WHERE id = ? AND tenant = ? AND project = ?", (run_id, scope.tenant, scope.project)
    ).fetchone()
    if row is None:
        raise no_run(run_id, scope.tenant, scope.project)
    return row  # type: ignore[no-any-return]


def insert_run(conn: sqlite3.Connection, scope: Scope, fields: dict[str, Any], events: Sequence[EventSpec]) -> str:
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
    conn.execute(f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", tuple(row.values()))
    append_events(conn, run_id, len(events), events, at)
    return run_id


def renew(conn: sqlite3.Connection, leases: Sequence[tuple[str, int]], lease_s: float) -> dict[str, str]:
    """Extend held leases. Returns, for each lease still held, the pending cancel reason ('' = none)."""
    expires = now() + lease_s
    held: dict[str, str] = {}
    for run_id, token in leases:
        row = conn.execute(
            "UPDATE runs SET lease_expires = ? WHERE id = ? AND lease_token = ? AND status = 'running' "
            "RETURNING cancel_requested, cancel_reason",
            (expires, run_id, token),
        ).fetchone()
        if row is not None:
            held[run_id] = (row[1] or "cancelled") if row[0] else ""
    return held


RELEASED = 0.0
"""``lease_expires`` of a lease its worker gave up on shutdown: the reaper hands the run on at once and,
since no worker was lost, does not count it towards ``MAX_LOST_LEASES``."""


def release(conn: sqlite3.Connection, leases: Sequence[tuple[str, int]]) -> None:
    """Give up held leases (worker shutdown) so that any worker can recover their runs at once."""
    conn.executemany(
        "UPDATE runs SET lease_expires = ? WHERE id = ? AND lease_token = ? AND status = 'running'",
        [(RELEASED, run_id, token) for run_id, token in leases],
    )


def end_unheld(conn: sqlite3.Connection, run_id: str, status: str, reason: str | None, sets: dict[str, Any]) -> None:
    """End a run no worker holds (queued, waiting or needing review): expire its pending interrupts, set ``status``."""
    expired = conn.execute(
        "UPDATE run_interrupts SET status = 'expired' WHERE run_id = ? AND status = 'pending' RETURNING id", (run_id,)
    ).fetchall()
    events: list[EventSpec] = [("interrupt.expired", {"interrupt_id": r[0]}) for r in expired]
    events.append(("run.state.changed", {"status": status, "reason": reason}))
    plain_update(conn, run_id, {"status": status, **sets}, events)
