"""Durable runs as spans: ``run WORKFLOW`` per drive, ``step NAME`` per step execution, ``effect KEY`` per
effect, interrupts as events, all in the trace of the span that started the run.

The tracing is the real one (``OtelTracing``: SDK, batch processor, OTLP/HTTP exporter to the local
receiver); the runtime drives the runs with its own worker, as ``serve`` does. ``shutdown`` flushes,
so every span has arrived when it returns. A span named ``tools/call run_start`` stands for the
request that starts a run (the server's request spans are tested against real servers in
``test_request_spans.py`` and ``test_run_traces.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime import EffectClass, Runtime, StepContext, SyncStepContext, Workflow, step
from runtime.telemetry.otel import OtelTracing
from runtime.telemetry.otlp import OtlpSpanExporter
from tests.otel_receiver import ReceivedSpan, Receiver, receiving

pytestmark = pytest.mark.anyio

SECRET = "the launch code is swordfish-4411"
WAIT_S = 30.0


class Spawner(Workflow):
    """Starts an echo run from its step, with an effect of its own first."""

    name = "spawner"

    @step(entry=True, effects=EffectClass.NON_IDEMPOTENT)
    async def spawn(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        noted = await ctx.effect("note", lambda: "noted", EffectClass.IDEMPOTENT)
        child = await ctx.runtime.runs.start("echo", input={"message": state["message"]})  # type: ignore[attr-defined]
        return {**state, "noted": noted, "child": child.id}


class Recaller(Workflow):
    """Recalls what it was told to look for from memory."""

    name = "recaller"

    @step(entry=True, effects=EffectClass.READ_ONLY)
    async def look(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        hits = await ctx.runtime.memory.recall(state["query"], k=3)
        return {**state, "hits": len(hits)}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


def tracing_to(receiver: Receiver) -> OtelTracing:
    return OtelTracing(OtlpSpanExporter(endpoint=f"{receiver.url}/v1/traces"))


def named(receiver: Receiver, name: str) -> list[ReceivedSpan]:
    return [s for s in receiver.spans if s.name == name]


def attributes_of(receiver: Receiver) -> str:
    return repr([(s.name, s.attributes, s.status_message, s.event_attributes) for s in receiver.spans])


async def test_an_answered_run_is_one_trace_of_drives_steps_effects_and_interrupt_events(
    home: Path, receiver: Receiver
) -> None:
    tracing = tracing_to(receiver)
    try:
        async with Runtime.open(home, tracing=tracing) as rt:
            with tracing.span("tools/call run_start", kind="server"):
                started = await rt.runs.start("approval", input={"message": SECRET})
                request = tracing.ids()
            assert request is not None and started.trace_id == request[0]
            waiting = await rt.runs.wait(started.id, WAIT_S)
            assert waiting.status == "waiting", waiting
            interrupt = waiting.pending_interrupts[0]
            await rt.runs.resolve_interrupt(interrupt.id, "approve", actor="alice")
            done = await rt.runs.wait(started.id, WAIT_S)
            assert done.status == "succeeded", done
            assert done.trace_id == request[0] and done.summary()["trace_id"] == request[0]
    finally:
        tracing.shutdown()

    trace, request_span = request
    drives = named(receiver, "run approval")
    assert len(drives) == 2  # one until it parked on the question, one after the answer
    for drive in drives:  # each a child of the request that started the run, ended long before the second
        assert (drive.trace_id, drive.parent_span_id) == (trace, request_span)
        assert drive.attributes == {"rath.run_id": started.id, "rath.workflow": "approval"}
    steps = {s.span_id: s for s in receiver.spans if s.name.startswith("step ")}
    by_drive = {d.span_id: sorted(s.name for s in steps.values() if s.parent_span_id == d.span_id) for d in drives}
    assert sorted(by_drive.values()) == [
        ["step draft", "step review"],
        ["step publish", "step review", "step route"],
    ], by_drive
    reviews = named(receiver, "step review")
    asked = next(s for s in reviews if "interrupt.asked" in s.events)
    decided = next(s for s in reviews if "interrupt.decided" in s.events)
    assert asked.attributes["rath.step.outcome"] == "parked"
    assert asked.event_attributes[asked.events.index("interrupt.asked")] == {
        "rath.interrupt.id": interrupt.id,
        "rath.interrupt.kind": "approval",
    }
    assert decided.event_attributes[decided.events.index("interrupt.decided")] == {
        "rath.interrupt.id": interrupt.id,
        "rath.interrupt.action": "approve",
        "rath.interrupt.actor": "alice",
    }
    assert decided.attributes["rath.step"] == "review"
    assert (decided.attributes["rath.visit"], decided.attributes["rath.attempt"]) == (2, 1)
    assert decided.attributes["rath.step.outcome"] == "ok"
    publish = named(receiver, "step publish")[0]
    effect = named(receiver, "effect publish")[0]
    assert (effect.trace_id, effect.parent_span_id) == (trace, publish.span_id)
    assert effect.attributes["rath.effect.class"] == "idempotent"
    assert effect.attributes["rath.effect.outcome"] == "succeeded"
    assert effect.attributes["rath.effect.id"].startswith("eff")
    assert "swordfish" not in attributes_of(receiver)  # the draft, the prompt: never attributes by default


async def test_a_run_started_from_a_step_is_a_child_of_that_step(home: Path, receiver: Receiver) -> None:
    tracing = tracing_to(receiver)
    try:
        async with Runtime.open(home, tracing=tracing) as rt:
            rt.workflows.register(Spawner)
            parent = await rt.runs.start("spawner", input={"message": SECRET})
            assert parent.trace_id is None  # started outside any span: its first drive starts its trace
            parent = await rt.runs.wait(parent.id, WAIT_S)
            assert parent.status == "succeeded", parent
            child = await rt.runs.wait(parent.state["child"], WAIT_S)
            assert child.status == "succeeded", child
    finally:
        tracing.shutdown()

    drive = named(receiver, "run spawner")[0]
    assert drive.parent_span_id == ""  # the root of its own trace
    assert parent.trace_id == drive.trace_id  # kept by the drive's first commit, for later drives
    spawn = named(receiver, "step spawn")[0]
    note = named(receiver, "effect note")[0]
    assert note.parent_span_id == spawn.span_id and note.attributes["rath.effect.outcome"] == "succeeded"
    echo = named(receiver, "run echo")[0]
    assert (echo.trace_id, echo.parent_span_id) == (drive.trace_id, spawn.span_id)
    assert child.trace_id == drive.trace_id
    assert named(receiver, "step echo")[0].parent_span_id == echo.span_id
    assert "swordfish" not in attributes_of(receiver)


async def test_without_tracing_runs_keep_no_trace_context(home: Path) -> None:
    async with Runtime.open(home) as rt:
        run = await rt.runs.start("echo", input={"message": "hi"})
        run = await rt.runs.wait(run.id, WAIT_S)
    assert run.status == "succeeded" and run.trace_id is None and run.summary()["trace_id"] is None


async def test_a_memory_recall_in_a_step_is_a_span_under_it_without_the_query(home: Path, receiver: Receiver) -> None:
    tracing = tracing_to(receiver)
    try:
        async with Runtime.open(home, tracing=tracing) as rt:
            rt.workflows.register(Recaller)
            await rt.memory.remember(f"the vault code: {SECRET}")
            run = await rt.runs.start("recaller", input={"query": "swordfish vault"})
            run = await rt.runs.wait(run.id, WAIT_S)
            assert run.status == "succeeded" and run.state["hits"] == 1, run
    finally:
        tracing.shutdown()
    look = named(receiver, "step look")[0]
    recall = named(receiver, "memory recall")[0]
    assert (recall.trace_id, recall.parent_span_id) == (look.trace_id, look.span_id)
    assert recall.attributes == {"rath.memory.mode": "keyword", "rath.memory.k": 3, "rath.memory.hits": 1}
    assert "swordfish" not in attributes_of(receiver)


async def test_a_run_whose_worker_vanished_is_driven_again_with_a_lease_taken_over_event(
    home: Path, receiver: Receiver
) -> None:
    async with Runtime.open(home, workers=0) as rt:
        run = await rt.runs.start("echo", input={"message": "hi"})
        (ghost,) = await rt.engine.queue.claim("a-worker-that-vanishes", 0.001, 1, ["echo"])  # never renewed
        assert ghost.id == run.id
    tracing = tracing_to(receiver)
    try:
        async with Runtime.open(home, tracing=tracing, workers=1) as rt:  # reaps the lapsed lease, drives the run
            done = await rt.runs.wait(run.id, WAIT_S)
            assert done.status == "succeeded", done
    finally:
        tracing.shutdown()
    (drive,) = named(receiver, "run echo")
    assert drive.events == ["lease.taken_over"]
    assert drive.event_attributes == [{"rath.lost_leases": 1}]


class SyncNoter(Workflow):
    """A sync step (run in a child process) with two effects: one that succeeds, one that fails and is caught."""

    name = "sync_noter"

    @step(entry=True, effects=EffectClass.NON_IDEMPOTENT)
    def note(self, state: dict[str, Any], ctx: SyncStepContext) -> dict[str, Any]:
        noted = ctx.effect("note", lambda: "noted", EffectClass.IDEMPOTENT)
        try:
            ctx.effect("refuse", _refuse, EffectClass.IDEMPOTENT)
        except ValueError:
            pass
        return {**state, "noted": noted}


def _refuse() -> None:
    raise ValueError("not this one")


async def test_a_sync_steps_effects_are_spans_of_its_step(home: Path, receiver: Receiver) -> None:
    tracing = tracing_to(receiver)
    try:
        async with Runtime.open(home, tracing=tracing) as rt:
            rt.workflows.register(SyncNoter)
            run = await rt.runs.start("sync_noter", input={})
            run = await rt.runs.wait(run.id, WAIT_S)
            assert run.status == "succeeded", run
    finally:
        tracing.shutdown()

    step_span = named(receiver, "step note")[0]
    [note], [refuse] = named(receiver, "effect note"), named(receiver, "effect refuse")
    assert note.parent_span_id == step_span.span_id and refuse.parent_span_id == step_span.span_id
    assert note.attributes["rath.effect.outcome"] == "succeeded" and note.attributes["rath.effect.id"].startswith("eff")
    assert refuse.attributes["rath.effect.outcome"] == "failed" and refuse.attributes["error.type"] == "ValueError"
