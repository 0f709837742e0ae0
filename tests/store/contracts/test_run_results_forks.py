"""The ``RunStore`` contract for results, forks and request fingerprints, on every backend.

A run's ``result`` is set by the commit that ends it; a checkpoint records the run's session as it
was (its output session so far, else its input session), which is what a fork starts from; a run
created as a fork starts with a state of its own at a step of its own and names its origin; a
request fingerprint stored with an idempotency key says which part of a different request differs.
"""

from __future__ import annotations

import pytest

from runtime.backend import StoreBackend
from runtime.durable.store import RELEASE, NewRun, RunStore, StepCommit, request_fingerprint
from runtime.errors import ConflictError, LeaseLostError
from runtime.sessions.service import SessionService

pytestmark = pytest.mark.anyio


def runs(backend: StoreBackend) -> RunStore:
    store: RunStore = backend.runs("local", "default")
    return store


def new_run(**fields: object) -> NewRun:
    base: dict[str, object] = {"workflow": "wf", "plan_hash": "h1", "step": "first", "input_json": '{"n": 1}'}
    return NewRun(**{**base, **fields})  # type: ignore[arg-type]


async def test_a_checkpoint_records_the_runs_session_and_the_ending_commit_its_result(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await store.create(new_run(session_id="ses_in"), [("run.created", {})])
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    assert claim.output_session_id is None
    step = [("step.completed", {}), ("checkpoint.created", {})]
    await store.commit(StepCommit(run_id, claim.token, {"step": "second"}, step, checkpoint=('{"n": 2}', "second", [])))
    await store.commit(
        StepCommit(run_id, claim.token, {"output_session_id": "ses_out"}, step, checkpoint=("{}", "third", []))
    )
    done = {**RELEASE, "status": "succeeded", "result": '{"answer": 42}'}
    await store.commit(StepCommit(run_id, claim.token, done, step, checkpoint=("{}", None, [])))
    assert [(c["next_step"], c["session_id"]) for c in await store.checkpoints(run_id)] == [
        ("second", "ses_in"),  # no output yet: the input session
        ("third", "ses_out"),
        (None, "ses_out"),
    ]
    run = await store.get(run_id)
    assert run.result == {"answer": 42} and run.summary()["result"] == {"answer": 42}
    assert run.forked_from is None and run.summary()["forked_from"] is None


async def test_a_claim_carries_the_output_session_a_run_already_has(backend: StoreBackend) -> None:
    store = runs(backend)
    run_id = await store.create(new_run(), [("run.created", {})])
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    requeue = {**RELEASE, "status": "queued", "output_session_id": "ses_so_far"}
    await store.commit(StepCommit(run_id, claim.token, requeue, [("run.state.changed", {})]))
    (again,) = await store.claim("w", 30.0, 1, ["wf"])
    assert again.output_session_id == "ses_so_far"


async def test_an_ending_commit_makes_the_output_session_it_is_given_in_its_own_transaction(
    backend: StoreBackend,
) -> None:
    """``commit(output_session=...)`` writes the session with the run's change, in the run's scope,
    and the run's output session is it; under a stale token neither is written."""
    store, sessions = runs(backend), backend.sessions("local", "default")
    run_id = await store.create(new_run(), [("run.created", {})])
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    empty = SessionService.new_empty({"run_id": run_id})
    with pytest.raises(LeaseLostError):
        await store.commit(StepCommit(run_id, claim.token + 1, {"status": "succeeded"}, [], output_session=empty))
    assert await sessions.page(None, 10) == []
    done = {**RELEASE, "status": "succeeded", "result": "null"}
    await store.commit(
        StepCommit(
            run_id, claim.token, done, [("checkpoint.created", {})], checkpoint=("{}", None, []), output_session=empty
        )
    )
    run = await store.get(run_id)
    (made,) = await sessions.page(None, 10)
    assert run.status == "succeeded" and run.output_session_id == made.id
    assert (made.op, made.length, made.parents, made.metadata) == ("create", 0, (), {"run_id": run_id})
    assert (made.tenant, made.project) == ("local", "default")
    assert [c["session_id"] for c in await store.checkpoints(run_id)] == [made.id]


async def test_a_fork_starts_at_its_own_step_with_its_own_state_and_names_its_origin(backend: StoreBackend) -> None:
    store = runs(backend)
    origin = await store.create(new_run(), [("run.created", {})])
    forked = new_run(step="second", state_json='{"n": 7}', session_id="ses_branch", forked_from=(origin, 4))
    fork_id = await store.create(forked, [("run.created", {}), ("run.forked", {"run_id": origin})])
    run = await store.get(fork_id)
    assert (run.step, run.state, run.input, run.status) == ("second", {"n": 7}, {"n": 1}, "queued")
    assert run.summary()["forked_from"] == {"run_id": origin, "checkpoint_seq": 4}
    assert [e.type for e in await store.events(fork_id, 0, 10)] == ["run.created", "run.forked"]
    (claim,) = [c for c in await store.claim("w", 30.0, 2, ["wf"]) if c.id == fork_id]
    assert claim.step == "second" and claim.state_json == '{"n": 7}'


async def test_a_different_request_under_a_key_is_refused_naming_what_differs(backend: StoreBackend) -> None:
    store = runs(backend)
    same = request_fingerprint(workflow="wf", message="hi", input={})
    first = await store.create(new_run(idempotency_key="k", request_hash=same), [("run.created", {})])
    assert await store.create(new_run(idempotency_key="k", request_hash=same), []) == first
    other = request_fingerprint(workflow="wf", message="bye", input={})
    with pytest.raises(ConflictError, match=r"key 'k' was used for run .* different message;"):
        await store.create(new_run(idempotency_key="k", request_hash=other), [])
