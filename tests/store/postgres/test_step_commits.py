"""Step commits of several runs made in one statement (``runtime.store.core.step_commits``), on the real
server: what each run gets is what its commit made alone writes, and fencing still holds run by run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import asyncpg
import pytest

from runtime.durable.store import HeldStep, NewRun, RunStore, StepCommit
from runtime.durable.store_shared import Scope
from runtime.errors import LeaseLostError
from runtime.store import parse_store_url
from runtime.store.core import runs, step_commits
from runtime.store.core.dialect import POSTGRES
from runtime.store.postgres import backend as postgres
from runtime.store.postgres.executor import drive

pytestmark = pytest.mark.anyio
SCOPE = Scope("local", "default")


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[postgres.PostgresBackend]:
    url = parse_store_url(pg_url)
    await postgres.migrate(url)
    backend = await postgres.open(url, max_size=3)
    backend.db.write_lanes = 1  # one lane: writes queued behind a held one make one batch
    try:
        yield backend
    finally:
        await backend.close()


def _step(name: str, following: str, n: int) -> HeldStep:
    state = f'{{"n": {n}}}'
    events = [("step.completed", {"step": name}), ("checkpoint.created", {"step": name}), ("step.started", {})]
    return HeldStep({"state": state, "step": following, "visit": n + 1}, events, (state, following, [f"i{n}"]))


def _commits(tokens: dict[str, int], a: str, b: str) -> list[StepCommit]:
    """Run ``a``: two held steps and its own; run ``b``: one step changing other columns, with a tail."""
    last = _step("third", "fourth", 3)
    held = [_step("first", "second", 1), _step("second", "third", 2)]
    return [
        StepCommit(a, tokens[a], last.change, list(last.events), checkpoint=last.checkpoint, held=held),
        StepCommit(b, tokens[b], {"state": '{"b": 1}', "attempt": 2}, [("step.failed", {"e": "x"})], tail=[("t", {})]),
    ]


async def _written(conn: asyncpg.Connection, run_id: str) -> dict[str, Any]:
    """What a run's commits wrote: its row's changed fields, its events and checkpoints (ids left out)."""
    row = await conn.fetchrow("SELECT state, step, visit, attempt, last_seq FROM runs WHERE id = $1", run_id)
    events = await conn.fetch("SELECT seq, type, data FROM run_events WHERE run_id = $1 ORDER BY seq", run_id)
    cps = await conn.fetch(
        "SELECT seq, state, next_step, pending, session_id FROM run_checkpoints WHERE run_id = $1 ORDER BY seq", run_id
    )
    return {"row": dict(row), "events": [tuple(e) for e in events], "checkpoints": [tuple(c) for c in cps]}


async def _queued_behind_a_held_lane(
    pg: postgres.PostgresBackend, commits: list[tuple[RunStore, StepCommit]]
) -> dict[str, Any]:
    """Make ``commits`` at once while the one write lane is held, so they queue and then make one batch;
    each one's result or error by run id."""
    db = pg.db
    release, holding = anyio.Event(), anyio.Event()
    outcomes: dict[str, Any] = {}

    async def hold(conn: asyncpg.Connection) -> None:
        holding.set()
        await release.wait()

    async def commit(store: RunStore, c: StepCommit) -> None:
        try:
            outcomes[c.run_id] = await store.commit(c)
        except LeaseLostError as exc:
            outcomes[c.run_id] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(db.write, hold)
        await holding.wait()
        for store, c in commits:
            tg.start_soon(commit, store, c)
        while len(db._pending) < len(commits):  # every one has queued behind the held lane
            await anyio.lowlevel.checkpoint()
        release.set()
    return outcomes


async def test_a_batch_of_step_commits_writes_what_each_commit_alone_writes_and_fences_each(
    pg: postgres.PostgresBackend,
) -> None:
    store = pg.runs(SCOPE.tenant, SCOPE.project)
    new = NewRun(workflow="wf", plan_hash="h", step="first", input_json="{}")
    ids = [await store.create(new, [("run.created", {})]) for _ in range(5)]
    tokens = {c.id: c.token for c in await store.claim("w", 30.0, 5, ["wf"])}
    a, b, stale, ref_a, ref_b = ids
    batch = _commits(tokens, a, b)
    assert all(step_commits.mergeable(c) for c in batch)
    moved = StepCommit(stale, tokens[stale] - 1, {"state": "{}"}, [("step.completed", {})])  # an older token
    before = {"batches": pg.db.stats["batches"], "merged": pg.db.stats["merged"]}
    async with pg.db._live_pool().acquire() as conn:
        stale_before = await _written(conn, stale)

    outcomes = await _queued_behind_a_held_lane(pg, [(store, c) for c in [*batch, moved]])

    assert outcomes[a] == [] and outcomes[b] == [] and isinstance(outcomes[stale], LeaseLostError)
    assert pg.db.stats["batches"] - before["batches"] == 2  # the held write's, then all three at once
    assert pg.db.stats["merged"] - before["merged"] == 3
    for c in _commits(tokens, ref_a, ref_b):  # the same commits, each made alone by the core's commit

        async def alone(conn: asyncpg.Connection, c: StepCommit = c) -> str:
            return await drive(conn, runs.commit(POSTGRES, SCOPE, c))

        await pg.db.write(alone)
    async with pg.db._live_pool().acquire() as conn:
        assert await _written(conn, a) == await _written(conn, ref_a)
        assert await _written(conn, b) == await _written(conn, ref_b)
        assert await _written(conn, stale) == stale_before  # nothing of the stale commit
        made = await _written(conn, a)
    base = made["row"]["last_seq"] - 9  # nine events: three for each of its three steps, after its claim's
    assert [c[0] for c in made["checkpoints"]] == [base + 2, base + 5, base + 8]  # at each checkpoint.created


async def test_a_batch_statement_that_fails_makes_each_of_its_commits_alone(pg: postgres.PostgresBackend) -> None:
    """Two commits of one run in one batch (which one worker never makes) number their events alike: the
    statement fails as a whole and each commit is then made alone, one after the other."""
    store = pg.runs(SCOPE.tenant, SCOPE.project)
    run_id = await store.create(NewRun(workflow="wf", plan_hash="h", step="s", input_json="{}"), [("run.created", {})])
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    twice = [StepCommit(run_id, claim.token, {"visit": v}, [("step.completed", {"v": v})]) for v in (2, 3)]
    before = dict(pg.db.stats)
    outcomes = await _queued_behind_a_held_lane(pg, [(store, c) for c in twice])
    assert outcomes == {run_id: []}
    assert pg.db.stats["merged"] == before["merged"]  # not merged in the end
    async with pg.db._live_pool().acquire() as conn:
        made = await _written(conn, run_id)
    tail = [(seq, kind, data) for seq, kind, data in made["events"]][-2:]
    assert [(kind, data) for _, kind, data in tail] == [("step.completed", '{"v":2}'), ("step.completed", '{"v":3}')]
    assert tail[1][0] == tail[0][0] + 1 == made["row"]["last_seq"] and made["row"]["visit"] == 3
