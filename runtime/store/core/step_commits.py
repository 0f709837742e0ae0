"""Many runs' step commits as ONE statement (where lists bind as arrays: PostgreSQL's group commit).

A run's commit (``runs.commit``) is, for each held step and then the step itself, one fenced update of
the run's row with its events and checkpoint (``run_rows.update_run``): one statement and so one
round trip each. Under load, when the database takes many runs' commits into one transaction, those
round trips set the pace (each waits for the server, and for this process, to be scheduled again).
``commit_steps`` makes them one statement for every commit of a batch that changes the same columns:

- the run rows, one UPDATE over arrays: each row fenced by its own token (``lease_token`` and status
  ``running``), so a commit whose lease was lost matches no row and writes nothing, the others still
  commit (as a lost commit rolls back alone under its savepoint on the one-commit-at-a-time path);
- their events and checkpoints, numbered after each updated row's ``last_seq``: inserted only for the
  rows the UPDATE matched (joined with its RETURNING).

A commit with held steps becomes one change of its run: the held changes and its own, applied in order
(the later value of a column wins, as successive UPDATEs leave it), every step's events in order and
each step's checkpoint at its own event, all with one timestamp (as ``runs.commit`` gives them). Only
commits for which that is exactly what the sequence of updates would have written are merged
(``mergeable``): none that settles effects, creates a session, claims, changes the run's status (a
status change may owe a webhook notification) or its output session (every checkpoint keeps the run's
session as it is after its own step).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from runtime.durable.store import EventSpec, RunChange, StepCommit, dumps
from runtime.durable.store_shared import check_change
from runtime.ids import now
from runtime.store.core.dialect import Dialect
from runtime.store.core.run_rows import changed, checkpoint_index, run_column_types
from runtime.store.core.statements import Op, one

#: Columns whose change keeps a commit out of a merged statement (see the module's text).
UNMERGED = frozenset({"status", "output_session_id"})


def mergeable(c: StepCommit) -> bool:
    """Whether ``commit_steps`` writes exactly what ``runs.commit`` would for ``c``."""
    if c.settle or c.output_session is not None or c.then_claim is not None:
        return False
    for change, events, checkpoint in _parts(c):
        if not UNMERGED.isdisjoint(change) or (checkpoint is not None and not events):
            return False
    return True


def _parts(c: StepCommit) -> Iterator[tuple[RunChange, Sequence[EventSpec], Any]]:
    """The updates ``runs.commit`` makes for ``c`` (without settling): each held step's, then its own."""
    for step in c.held:
        yield step.change, step.events, step.checkpoint
    yield c.change, [*c.events, *c.tail], c.checkpoint


@dataclass
class _Merged:
    """One run's commit as one change: its columns, events, and checkpoints at their events' ordinals."""

    run_id: str
    token: int
    sets: dict[str, Any] = field(default_factory=dict)
    events: list[EventSpec] = field(default_factory=list)
    checkpoints: list[tuple[int, str, str | None, str]] = field(default_factory=list)


def _merged(c: StepCommit, at: float) -> _Merged:
    out = _Merged(c.run_id, c.token)
    for change, events, checkpoint in _parts(c):
        out.sets.update(change)
        if checkpoint is not None:
            state_json, next_step, pending = checkpoint
            at_event = len(out.events) + checkpoint_index(events) + 1
            out.checkpoints.append((at_event, state_json, next_step, dumps(pending)))
        out.events += events
    if c.retry_in_s is not None:
        out.sets["next_at"] = at + c.retry_in_s
    return out


def commit_steps(d: Dialect, commits: Sequence[StepCommit]) -> Op[tuple[set[str], str | None]]:
    """Commit every one of ``commits`` (each ``mergeable``, of distinct runs) whose lease still holds:
    one statement per set of changed columns. Returns the runs committed, and the transaction's id.

    Rows are locked in the order of their ids, so that two such statements never wait on each other in
    a cycle. (Two commits of one run in one call would number their events alike: the statement then
    fails as a whole, and its caller makes each commit alone.)"""
    assert d.arrays, "one statement over arrays: where lists bind as arrays"
    at = now()
    shapes: dict[tuple[str, ...], list[_Merged]] = {}
    for c in sorted(commits, key=lambda c: c.run_id):
        merged = _merged(c, at)
        shapes.setdefault(tuple(sorted(merged.sets)), []).append(merged)
    committed: set[str] = set()
    xid: str | None = None
    for columns, group in shapes.items():
        found = yield one(_batch_sql(columns), *_batch_args(columns, group, at))
        committed.update(found[0])
        xid = found[1]
    yield from changed(d, sorted(committed))
    return committed, xid


def _batch_args(columns: tuple[str, ...], group: list[_Merged], at: float) -> list[Any]:
    args: list[Any] = [at, [m.run_id for m in group], [m.token for m in group], [len(m.events) for m in group]]
    args += [[m.sets[col] for m in group] for col in columns]
    events = [(m.run_id, n, kind, dumps(data)) for m in group for n, (kind, data) in enumerate(m.events, 1)]
    args += [at, *_columns(events, 4)]
    checkpoints = [(m.run_id, *cp) for m in group for cp in m.checkpoints]
    args += [at, *_columns(checkpoints, 5)]
    return args


def _columns(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """``rows`` as ``width`` lists, one per column (each bound as one array)."""
    return [[row[i] for row in rows] for i in range(width)]


@lru_cache(maxsize=64)
def _batch_sql(columns: tuple[str, ...]) -> str:
    """The statement of ``commit_steps`` for commits changing ``columns`` (a handful of sets, over and over:
    each text stays the same, so the driver prepares it once per connection)."""
    check_change(dict.fromkeys(columns))
    types = run_column_types()
    values = "".join(f", ?::{types[col]}[]" for col in columns)
    names = "".join(f", {col}" for col in columns)
    sets = "".join(f", {col} = v.{col}" for col in columns)
    return (
        "WITH u AS (UPDATE runs SET last_seq = runs.last_seq + v.n, updated_at = ?::double precision"
        f"{sets} FROM unnest(?::text[], ?::bigint[], ?::int[]{values}) AS v(id, token, n{names}) "
        "WHERE runs.id = v.id AND runs.lease_token = v.token AND runs.status = 'running' "
        "RETURNING runs.id, runs.last_seq - v.n AS base, COALESCE(runs.output_session_id, runs.session_id) AS ses), "
        "e AS (INSERT INTO run_events (run_id, seq, type, data, created_at) "
        "SELECT u.id, u.base + e.ord, e.t, e.d, ?::double precision "
        "FROM unnest(?::text[], ?::int[], ?::text[], ?::text[]) AS e(run, ord, t, d) JOIN u ON u.id = e.run), "
        "c AS (INSERT INTO run_checkpoints (run_id, seq, state, next_step, pending, session_id, created_at) "
        "SELECT u.id, u.base + c.ord, c.s, c.ns, c.p, u.ses, ?::double precision "
        "FROM unnest(?::text[], ?::int[], ?::text[], ?::text[], ?::text[]) AS c(run, ord, s, ns, p) "
        "JOIN u ON u.id = c.run) "
        "SELECT ARRAY(SELECT id FROM u), pg_current_xact_id()::text"
    )
