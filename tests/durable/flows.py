"""Workflows the durable tests run, in-process and in worker subprocesses (``tests.durable.proc``).

Effects write lines to a log file named by the run's input, so tests (and other processes) can
count exactly how often each effect really happened. "Gates" are files: a step waits while its
gate file exists, which lets a test hold a step (even in another process) and then let it go.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio

from runtime import EffectClass, RetryPolicy, Session, StepContext, SyncStepContext, Workflow, router, step
from runtime.sessions import SessionInfo


def record(log: str, line: str) -> str:
    """The side effect: append a line to a file (what a test counts)."""
    with open(log, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    return line


def lines(log: str | Path) -> list[str]:
    path = Path(log)
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


async def gate(path: str | None) -> None:
    """Wait while the gate file exists (polled: the test may remove it from another process)."""
    while path and Path(path).exists():  # noqa: ASYNC110, ASYNC240 - a file another process removes
        await anyio.sleep(0.02)


async def released(path: Path) -> None:
    """Wait until the release file exists (the test, maybe in another process, makes it)."""
    while not path.exists():  # noqa: ASYNC110, ASYNC240 - a file another process makes
        await anyio.sleep(0.02)


async def hold(state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
    """Log entering, wait for this run's release file, log leaving: the test sees who runs at once."""
    record(state["log"], f"enter {ctx.run_id}")
    await released(Path(state["release"]) / ctx.run_id)
    record(state["log"], f"exit {ctx.run_id}")
    return state


class Limited(Workflow):
    """At most two runs at once, each held until the test releases it."""

    concurrency = 2

    @step(entry=True, effects=EffectClass.NONE)
    async def work(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return await hold(state, ctx)


class PerUser(Workflow):
    """One run per user at a time (the input's ``user``), each held until the test releases it."""

    concurrency_key = "user"

    @step(entry=True, effects=EffectClass.NONE)
    async def work(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return await hold(state, ctx)


class OneAsking(Workflow):
    """One run at a time, and each asks a human: a waiting run must not keep the next from running."""

    concurrency = 1

    @step(entry=True, effects=EffectClass.NONE)
    async def ask(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        decision = await ctx.interrupt("approval", prompt="go on?")
        return {**state, "decided": decision.action}


class Ledger(Workflow):
    """Two effects, an optional hold, then a final effect in a second step."""

    @step(entry=True, successors=["finish"], effects=EffectClass.NON_IDEMPOTENT)
    async def work(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        log = state["log"]
        a = await ctx.effect("a", lambda: record(log, "a"))
        b = await ctx.effect("b", lambda: record(log, "b"), EffectClass.IDEMPOTENT)

        async def hanging() -> str:
            record(log, "c-start")
            await gate(state.get("effect_gate"))
            return "c"

        c = await ctx.effect("c", hanging) if state.get("effect_gate") else None
        await ctx.progress("holding")
        await gate(state.get("gate"))
        return {**state, "results": [a, b, c]}

    @step(effects=EffectClass.NON_IDEMPOTENT)
    async def finish(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        await ctx.effect("done", lambda: record(state["log"], "done"))
        return {**state, "finished": True}


class TimedEffect(Workflow):
    """A step timeout that strikes while a non-idempotent effect is in flight."""

    @step(entry=True, timeout_s=0.5)
    async def pay(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        async def paying() -> str:
            record(state["log"], "pay-start")
            await gate(state.get("effect_gate"))
            return "paid"

        return {**state, "paid": await ctx.effect("pay", paying)}


class Questions(Workflow):
    """One step with an effect, two interrupts and an effect in between."""

    @step(entry=True)
    async def ask(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        log = state["log"]
        await ctx.effect("before", lambda: record(log, "before"))
        first = await ctx.interrupt("input", prompt="first?", schema={"type": "string"})
        await ctx.effect("between", lambda: record(log, "between"))
        second = await ctx.interrupt("approval", prompt="second?", timeout_s=state.get("timeout_s"))
        return {**state, "answers": [first.value, second.action]}


class Loop(Workflow):
    """Counts to ``n`` through a router that loops back."""

    @step(entry=True, successors=["check"], effects=EffectClass.NONE)
    async def inc(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "i": state.get("i", 0) + 1, "visits": [*state.get("visits", []), ctx.visit]}

    @router(successors=["inc", "done"])
    async def check(self, state: dict[str, Any], ctx: StepContext) -> str:
        return "inc" if state["i"] < state["n"] else "done"

    @step(effects=EffectClass.NONE)
    def done(self, state: dict[str, Any], ctx: SyncStepContext) -> dict[str, Any]:
        return {**state, "finished_in_child": True}


class Flaky(Workflow):
    """Fails until attempt ``succeed_on``; retries with backoff."""

    @step(entry=True, effects=EffectClass.READ_ONLY, retry=RetryPolicy(max_attempts=3, backoff_s=0.3, multiplier=1.0))
    async def attempt_it(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        if ctx.attempt < state["succeed_on"]:
            raise RuntimeError(f"attempt {ctx.attempt} fails on purpose")
        return {**state, "attempt": ctx.attempt}


class SlowFlaky(Workflow):
    """Fails once, then waits a backoff (an hour) far longer than any test runs before its retry."""

    @step(entry=True, effects=EffectClass.READ_ONLY, retry=RetryPolicy(max_attempts=2, backoff_s=3600.0))
    async def attempt_it(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        if ctx.attempt < 2:
            raise RuntimeError("first attempt fails on purpose")
        return state


class SyncCharge(Workflow):
    """A sync step (isolated in a child process) with a ledgered effect, failing once, then retried."""

    @step(entry=True, retry=1, idempotency_key="charge:{run_id}")
    def charge(self, state: dict[str, Any], ctx: SyncStepContext) -> dict[str, Any]:
        done = ctx.effect("charge", lambda: record(state["log"], f"charge {ctx.idempotency_key}"))
        ctx.progress("charged")
        if ctx.attempt == 1:
            raise RuntimeError("fails after the charge, on purpose")
        return {**state, "charged": done, "attempt": ctx.attempt}


class Sleepy(Workflow):
    """A step that sleeps: sync (in a child process) or async, optionally with a step timeout."""

    @step(entry=True, effects=EffectClass.NONE)
    def nap(self, state: dict[str, Any], ctx: SyncStepContext) -> dict[str, Any]:
        ctx.progress("sleeping")
        time.sleep(state.get("sleep_s", 60))
        return {**state, "woke": True}


class SleepyWithTimeout(Workflow):
    @step(entry=True, effects=EffectClass.NONE, timeout_s=0.5)
    def nap(self, state: dict[str, Any], ctx: SyncStepContext) -> dict[str, Any]:
        time.sleep(60)
        return state


class SyncAsks(Workflow):
    """A sync step that (wrongly) asks a human; prints on the way (must not reach the parent's stdout)."""

    @step(entry=True, effects=EffectClass.NONE)
    def ask(self, state: dict[str, Any], ctx: SyncStepContext) -> dict[str, Any]:
        print("noise from a sync step")
        ctx.interrupt("approval", prompt="?")  # type: ignore[attr-defined]
        return state


class AsyncSleepy(Workflow):
    @step(entry=True, effects=EffectClass.NONE)
    async def nap(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        await ctx.progress("sleeping")
        await anyio.sleep(state.get("sleep_s", 60))
        return {**state, "woke": True}


class Shout(Workflow):
    """A plain forward(session) workflow: replies with the last message in capitals."""

    async def forward(self, session: Session, ctx: StepContext) -> SessionInfo:
        last = session.last.content if session.last is not None else ""
        return await ctx.runtime.sessions.append(session.id, [{"kind": "assistant", "content": last.upper()}])


class TenSteps(Workflow):
    """Ten no-op steps in a line (the benchmark's workflow)."""

    @step(entry=True, successors=["s1"], effects=EffectClass.READ_ONLY)
    async def s0(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "i": 0}


def _make_noop(i: int, last: bool) -> Any:
    async def noop(self: Workflow, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "i": i}

    noop.__name__ = f"s{i}"
    return step(successors=[] if last else [f"s{i + 1}"], effects=EffectClass.READ_ONLY)(noop)


for _i in range(1, 10):
    setattr(TenSteps, f"s{_i}", _make_noop(_i, _i == 9))
