"""Runs end to end through ``rt.runs``: shipped workflows, sessions in and out, graphs, idempotent submit."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from runtime import ConflictError, InvalidInputError, NotFoundError, Runtime
from tests.durable.conftest import eventually

pytestmark = pytest.mark.anyio

SUMMARY_KEYS = {
    "run_id",
    "workflow",
    "status",
    "step",
    "session_id",
    "output_session_id",
    "result",
    "error",
    "pending_interrupts",
    "forked_from",
    "schedule_id",
    "priority",
    "trace_id",
    "created_at",
    "updated_at",
}


async def test_echo_replies_into_a_new_session_snapshot(drt: Runtime) -> None:
    session = await drt.sessions.create([{"kind": "user", "content": "hello there"}])
    run = await drt.runs.start("echo", session_id=session.id)
    run = await drt.runs.wait(run.id, 10)
    assert run.status == "succeeded" and run.state == {"reply": "hello there"}
    assert set(run.summary()) == SUMMARY_KEYS
    out = await drt.sessions.get(run.output_session_id or "")
    assert out.parents == (session.id,) and out.op == "run"
    assert [(c.kind, c.content) for c in out.chunks] == [("user", "hello there"), ("assistant", "hello there")]


async def test_echo_without_session_or_message_fails_with_a_clear_error(drt: Runtime) -> None:
    run = await drt.runs.wait((await drt.runs.start("echo")).id, 10)
    assert run.status == "failed"
    assert "echo needs input.message or a session" in (run.error or "")


async def test_approval_approved_appends_the_draft_to_the_session(drt: Runtime) -> None:
    session = await drt.sessions.create([{"kind": "user", "content": "draft a note"}])
    run = await drt.runs.start("approval", session_id=session.id, input={"draft": "v2 ships today"})
    run = await drt.runs.wait(run.id, 10)
    assert run.status == "waiting" and run.step == "review"
    (pending,) = run.pending_interrupts
    assert pending.kind == "approval" and "v2 ships today" in pending.prompt
    assert run.summary()["pending_interrupts"][0]["interrupt_id"] == pending.id
    await drt.runs.resolve_interrupt(pending.id, "approve", actor="ana")
    run = await drt.runs.wait(run.id, 10)
    assert run.status == "succeeded" and run.state["outcome"] == "approved"
    out = await drt.sessions.get(run.output_session_id or "")
    assert out.chunks[-1].content == "v2 ships today"
    assert [(c.kind, c.name) for c in out.chunks] == [
        ("user", None),
        ("assistant", "interrupt"),  # the question the run asked
        ("user", "decision"),  # the human's answer, then the published draft
        ("assistant", None),
    ]
    assert "[decision" in out.chunks[2].content and "by ana] approve" in out.chunks[2].content
    assert run.result == {
        "outcome": "approved",
        "draft": "v2 ships today",
        "decided_by": "ana",
        "reason": None,
        "revision": 1,
    }


async def test_approval_loops_on_feedback_and_can_be_rejected(drt: Runtime) -> None:
    run = await drt.runs.wait((await drt.runs.start("approval", input={"message": "plan"})).id, 10)
    await drt.runs.resolve_interrupt(run.pending_interrupts[0].id, "respond", "more detail")
    run = await drt.runs.wait(run.id, 10)
    assert run.status == "waiting" and "revised after feedback: more detail" in run.pending_interrupts[0].prompt
    await drt.runs.resolve_interrupt(run.pending_interrupts[0].id, "reject", reason="not now")
    run = await drt.runs.wait(run.id, 10)
    assert run.status == "succeeded"
    assert run.state["outcome"] == "rejected" and run.state["reason"] == "not now" and run.state["revision"] == 2
    assert run.result["outcome"] == "rejected" and run.result["reason"] == "not now"
    out = await drt.sessions.get(run.output_session_id or "")  # rejected, yet the transcript says so
    assert [c.name for c in out.chunks] == ["interrupt", "decision", "interrupt", "decision"]  # no input session
    assert "respond: more detail" in out.chunks[1].content and "reject (reason: not now)" in out.chunks[3].content


async def test_a_decision_value_is_checked_against_the_interrupt_schema(drt: Runtime) -> None:
    run = await drt.runs.wait((await drt.runs.start("approval", input={"message": "x"})).id, 10)
    with pytest.raises(InvalidInputError, match="does not match its schema"):
        await drt.runs.resolve_interrupt(run.pending_interrupts[0].id, "edit", {"not": "a string"})
    with pytest.raises(InvalidInputError, match="action 'maybe' is not one of"):
        await drt.runs.resolve_interrupt(run.pending_interrupts[0].id, "maybe")
    await drt.runs.resolve_interrupt(run.pending_interrupts[0].id, "edit", "better text")
    with pytest.raises(ConflictError, match="already decided"):
        await drt.runs.resolve_interrupt(run.pending_interrupts[0].id, "approve")
    run = await drt.runs.wait(run.id, 10)
    assert run.state["draft"] == "better text" and run.state["outcome"] == "approved"


async def test_graphs_branch_and_loop_and_sync_steps_run(drt: Runtime) -> None:
    run = await drt.runs.wait((await drt.runs.start("loop", input={"n": 3})).id, 10)
    assert run.status == "succeeded", run.error
    assert run.state["i"] == 3 and run.state["finished_in_child"] is True
    assert run.state["visits"] == [1, 3, 5]  # inc, check, inc, check, inc, check, done
    steps = [e.data["step"] for e in await drt.runs.events(run.id) if e.type == "step.completed"]
    assert steps == ["inc", "check", "inc", "check", "inc", "check", "done"]


async def test_a_forward_workflow_runs_as_one_durable_step(drt: Runtime) -> None:
    session = await drt.sessions.create([{"kind": "user", "content": "quiet please"}])
    run = await drt.runs.wait((await drt.runs.start("shout", session_id=session.id)).id, 10)
    assert run.status == "succeeded" and run.step == "forward"
    out = await drt.sessions.get(run.output_session_id or "")
    assert out.chunks[-1].content == "QUIET PLEASE"
    no_session = await drt.runs.wait((await drt.runs.start("shout", input={"message": "hey"})).id, 10)
    assert (await drt.sessions.get(no_session.output_session_id or "")).chunks[-1].content == "HEY"


async def test_events_are_ordered_and_checkpoints_recorded(drt: Runtime) -> None:
    run = await drt.runs.wait((await drt.runs.start("loop", input={"n": 1})).id, 10)
    events = await drt.runs.events(run.id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "run.created" and events[-1].data == {"status": "succeeded"}
    assert [e.seq for e in await drt.runs.events(run.id, after_seq=3, limit=2)] == [4, 5]
    checkpoints = await drt.runs.checkpoints(run.id)
    assert [c["next_step"] for c in checkpoints] == ["check", None]  # routers do not checkpoint
    assert all(events[c["seq"] - 1].type == "checkpoint.created" for c in checkpoints)


async def test_the_same_idempotency_key_returns_the_same_run(drt: Runtime) -> None:
    first = await drt.runs.start("echo", input={"message": "once"}, idempotency_key="k1")
    again = await drt.runs.start("echo", input={"message": "once"}, idempotency_key="k1")
    assert again.id == first.id
    with pytest.raises(ConflictError, match=r"idempotency key 'k1' was used for run .* different input"):
        await drt.runs.start("echo", input={"message": "twice"}, idempotency_key="k1")
    runs, _ = await drt.runs.list(workflow="echo")
    assert [r.id for r in runs] == [first.id]


async def test_bad_starts_say_what_to_fix(drt: Runtime) -> None:
    with pytest.raises(NotFoundError, match="known workflows"):
        await drt.runs.start("nope")
    with pytest.raises(InvalidInputError, match=r"input of echo does not match its schema at message"):
        await drt.runs.start("echo", input={"message": 5})
    with pytest.raises(NotFoundError):
        await drt.runs.start("echo", session_id="ses_000000000000000000000000")
    with pytest.raises(InvalidInputError, match="deadline_s"):
        await drt.runs.start("echo", input={"message": "x"}, deadline_s=0)
    with pytest.raises(NotFoundError, match="no run"):
        await drt.runs.get("run_000000000000000000000000")
    runs, _ = await drt.runs.list()
    assert runs == []  # nothing half-written


async def test_list_pages_and_filters(drt: Runtime) -> None:
    ids = [(await drt.runs.start("echo", input={"message": str(i)})).id for i in range(5)]
    for run_id in ids:
        await drt.runs.wait(run_id, 10)
    page, cursor = await drt.runs.list(limit=2)
    assert [r.id for r in page] == ids[::-1][:2] and cursor == ids[3]
    page, cursor = await drt.runs.list(cursor=cursor, limit=10)
    assert [r.id for r in page] == ids[::-1][2:] and cursor is None
    assert len((await drt.runs.list(status="succeeded"))[0]) == 5
    assert (await drt.runs.list(status="failed"))[0] == []
    with pytest.raises(InvalidInputError, match="status 'done' is not one of"):
        await drt.runs.list(status="done")


async def test_a_listed_run_carries_its_own_pending_interrupts(drt: Runtime) -> None:
    asking = [await drt.runs.wait((await drt.runs.start("approval", input={"message": m})).id, 10) for m in "ab"]
    done = await drt.runs.wait((await drt.runs.start("echo", input={"message": "c"})).id, 10)
    listed = {r.id: r for r in (await drt.runs.list())[0]}
    assert [len(r.pending_interrupts) for r in asking] == [1, 1] and done.pending_interrupts == ()
    assert all(listed[r.id].pending_interrupts == r.pending_interrupts for r in [*asking, done])


async def test_watch_yields_every_change_until_terminal(drt: Runtime) -> None:
    run = await drt.runs.start("approval", input={"message": "watch me"})
    seen: list[str] = []
    waiting = anyio.Event()

    async def watcher() -> None:
        async with drt.runs.watch(run.id) as changes:
            async for changed in changes:
                seen.append(changed.status)
                if changed.status == "waiting":
                    waiting.set()

    with anyio.fail_after(60):  # a safety net only
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher)
            await waiting.wait()
            await drt.runs.resolve_interrupt((await drt.runs.interrupts(run.id))[0].id, "approve")
    assert seen[-1] == "succeeded" and "waiting" in seen


async def test_wait_returns_at_its_timeout_while_a_run_is_busy(drt: Runtime, log: str, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    run = await drt.runs.start("ledger", input={"log": log, "gate": str(gate)})
    with anyio.fail_after(5):
        got = await drt.runs.wait(run.id, 0.3)
    assert got.status in ("queued", "running")
    gate.unlink()
    assert (await drt.runs.wait(run.id, 10)).status == "succeeded"


async def test_several_runs_progress_at_once(drt: Runtime, log: str, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    runs = [await drt.runs.start("ledger", input={"log": f"{log}.{i}", "gate": str(gate)}) for i in range(3)]

    async def all_holding() -> bool:
        for run in runs:
            if not any(e.type == "step.progress" for e in await drt.runs.events(run.id)):
                return False
        return True

    await eventually(all_holding)  # three steps in flight at the same moment
    assert {(await drt.runs.get(r.id)).status for r in runs} == {"running"}
    gate.unlink()
    for run in runs:
        assert (await drt.runs.wait(run.id, 10)).status == "succeeded"


async def test_runs_are_scoped_to_their_project(home: Path) -> None:
    async with Runtime.open(home, project="a", workers=0) as a, Runtime.open(home, project="b") as b:
        run = await a.runs.start("echo", input={"message": "mine"})
        with pytest.raises(NotFoundError):
            await b.runs.get(run.id)
        with pytest.raises(NotFoundError):
            await b.runs.cancel(run.id)
        assert (await b.runs.list())[0] == [] and await b.runs.interrupts() == []
        # one worker serves every scope of the store: b's drives a's run, inside a's scope
        done = await a.runs.wait(run.id, 10)
        assert done.status == "succeeded" and done.output_session_id is not None
        assert (await a.sessions.info(done.output_session_id)).id == done.output_session_id
        with pytest.raises(NotFoundError):
            await b.sessions.info(done.output_session_id)
