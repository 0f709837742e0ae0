"""Drive one claimed run, step after step, while its worker holds the lease.

Each step ends in exactly one commit (``RunStore.commit``): new state, next step, events and a
checkpoint in one transaction, checked against the fencing token; a read-only step followed by another
may have its commit held and made by the next one (``held.py``). The run keeps its claim
between steps (no re-claim per step); it gives the claim up when it finishes, parks on an
interrupt, or fails and waits for a retry (a retry's backoff never holds a claim).

Calling a step's own code, and what came of it (an ``Outcome``), is ``step_call.py``'s; what each
outcome commits is here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

import anyio

from runtime.durable.context import CURRENT_RUN, LiveContext
from runtime.durable.engine import Engine
from runtime.durable.held import CHAINED, CommitLine
from runtime.durable.plan import Plan, StepPlan
from runtime.durable.step_call import Lease, Outcome, call_step
from runtime.durable.store import RELEASE, Claim, ClaimOrder, EventSpec, HeldStep, StepCheckpoint, StepCommit
from runtime.durable.traced import context_now, run_span, step_span
from runtime.ids import now
from runtime.sessions.service import SessionService
from runtime.sessions.store import NewSession

log = logging.getLogger(__name__)


class Runner:
    """Executes the steps of one run under one lease."""

    def __init__(
        self,
        engine: Engine,
        plan: Plan,
        claim: Claim,
        lease: Lease,
        *,
        successor: Callable[[], ClaimOrder | None] | None = None,
    ) -> None:
        self.engine, self.plan, self.lease = engine, plan, lease
        self.store = engine.stores(claim.tenant, claim.project)  # the run's own scope's
        # what the commit that ends this claim also claims (the worker's next run for this slot), asked
        # when that commit is made (the worker may be stopping by then), and what it got
        self.successor = successor
        self.next_claims: list[Claim] = []
        self.run_id: str = claim.id
        self.state_json: str = claim.state_json
        self.step: str = claim.step
        self.visit: int = claim.visit
        self.attempt: int = claim.attempt
        self.session_id: str | None = claim.session_id
        self.input: dict[str, Any] = json.loads(claim.input_json)
        self.deadline: float | None = claim.deadline
        self.plan_hash: str = claim.plan_hash
        self.output_session_id: str | None = claim.output_session_id
        self.workflow, self.trace_context, self.lost_leases = claim.workflow, claim.trace_context, claim.lost_leases
        self.unsaved_trace: str | None = None  # a first traced drive's context, stored with its first commit
        self.line = CommitLine(self._store_commit, self._committed, lease.lose, claim.id)

    def _store_commit(self, change: dict[str, Any], events: list[EventSpec], **options: Any) -> Awaitable[list[Claim]]:
        return self.store.commit(StepCommit(self.run_id, self.lease.token, change, events, **options))

    def _committed(self) -> None:
        self.engine.notify(self.run_id)

    async def _commit(
        self,
        sets: dict[str, Any],
        events: list[EventSpec],
        *,
        settle: bool = False,
        tail: Sequence[EventSpec] = (),
        checkpoint: StepCheckpoint | None = None,
        retry_in_s: float | None = None,
        output_session: NewSession | None = None,
    ) -> None:
        """Commit under the lease; ``settle`` settles dispatched effects, their events coming before ``tail``.

        ``retry_in_s``: the run may be claimed again that long after this commit. It is counted from
        the commit's own timestamp (the one its events carry), not from a clock read before the write
        queued, so "a retry starts at least ``retry_in_s`` after its ``step.failed``" holds exactly.
        A commit that gives the claim up (``RELEASE``) also claims the ``successor``.
        """
        order = None
        sets = self._stamped(sets)
        if "lease_owner" in sets and self.successor is not None:
            order, self.successor = self.successor(), None
        self.next_claims = await self.line.make(
            sets,
            events,
            settle=settle,
            tail=tail,
            checkpoint=checkpoint,
            retry_in_s=retry_in_s,
            output_session=output_session,
            then_claim=order,
        )
        self.engine.notify(self.run_id, *(claim.id for claim in self.next_claims))

    def _stamped(self, sets: dict[str, Any]) -> dict[str, Any]:
        """``sets``, with the trace context of this drive if the run had none yet (once)."""
        if self.unsaved_trace is None:
            return sets
        sets, self.unsaved_trace = {**sets, "trace_context": self.unsaved_trace}, None
        return sets

    async def drive(self) -> None:
        """Run steps until the run finishes, parks, fails, is cancelled or the lease is lost (one
        ``run WORKFLOW`` span, a child of where the run was started: ``runtime.durable.traced``)."""
        marker = CURRENT_RUN.set(self.run_id)
        failure: Exception | None = None
        tracing = self.engine.tracing
        try:
            with run_span(tracing, self.workflow, self.run_id, self.trace_context, self.lost_leases) as span:
                if span.recording and self.trace_context is None:
                    self.unsaved_trace = context_now(tracing)
                async with anyio.create_task_group() as tg:  # for the held steps' flushes
                    self.line.attach(tg)
                    try:
                        await self._drive()
                    except anyio.get_cancelled_exc_class():
                        await self._flush_quietly()  # the steps done before a shutdown are not done again
                        raise
                    except Exception as exc:  # raised as itself below, not inside the task group's ExceptionGroup
                        failure = exc
                        span.fail(type(exc).__qualname__, str(exc))
                    finally:
                        self.line.attach(None)
        finally:
            CURRENT_RUN.reset(marker)
        if failure is not None:
            raise failure

    async def _flush_quietly(self) -> None:
        held = self.line.holding  # counted before the flush takes them
        try:
            await self.line.flush()
        except Exception as exc:  # they run again, as after a crash
            log.info("run %s: %d held step(s) not committed: %s", self.run_id, held, exc)

    async def _drive(self) -> None:
        if self.plan_hash != self.plan.plan_hash:
            await self._adopt_plan()
        while True:
            if self.lease.cancelled:
                return await self._end("cancelled", f"cancelled: {self.lease.cancel_reason or 'by request'}")
            if self.deadline is not None and now() >= self.deadline:
                return await self._end("timed_out", "the run's deadline passed")
            spec = self.plan.steps.get(self.step)
            if spec is None:
                known = sorted(self.plan.steps)
                message = f"step {self.step!r} is not in workflow {self.plan.name!r} any more (steps: {known})"
                return await self._end("failed", message + "; the definition changed under a running run")
            ctx = self._context(spec)
            with step_span(self.engine.tracing, self.run_id, spec.name, self.attempt, self.visit) as span:
                ctx.span = span
                out = self._redacted(await call_step(self.plan, spec, ctx, self.lease, self.deadline))
                span.set("rath.step.outcome", out.kind)
                if out.kind == "failed":
                    span.fail("step_failed", out.error)
            self.line.raise_error()  # a held commit failed while the step ran: that ends this run here
            if out.kind == "ok":
                if not await self._advance(spec, ctx, out):
                    return
                continue
            if out.kind in ("parked", "lost"):
                return
            if out.kind == "cancelled":
                return await self._end("cancelled", f"cancelled: {self.lease.cancel_reason or 'by request'}")
            if out.kind == "deadline":
                return await self._end("timed_out", f"the run's deadline passed during step {self.step!r}")
            return await self._fail(spec, ctx, out.error)

    def _redacted(self, out: Outcome) -> Outcome:
        """The step's outcome with any secret resolved in this process replaced by ``secret://NAME``
        (``runtime.secrets``): the state, result and error it leaves are what the commit writes."""
        redact = self.engine.services.secrets.redactor
        if not redact:
            return out
        state, result, error = redact.text(out.state_json), redact.text(out.result_json), redact.text(out.error)
        return replace(out, state_json=state, result_json=result, error=error)

    async def _adopt_plan(self) -> None:
        """The workflow's definition changed since the run last ran: go on with the current one, and
        say so in the run's events (which plan ran which steps stays readable)."""
        change = {"from": self.plan_hash, "to": self.plan.plan_hash, "step": self.step}
        await self._commit({"plan_hash": self.plan.plan_hash}, [("run.plan_changed", change)])
        self.plan_hash = self.plan.plan_hash

    def _context(self, spec: StepPlan) -> LiveContext:
        key = spec.idempotency_key
        if key is not None:
            key = key.format(run_id=self.run_id, step=self.step, visit=self.visit)
        return LiveContext(
            self.engine,
            self.store,
            run_id=self.run_id,
            token=self.lease.token,
            step=self.step,
            visit=self.visit,
            attempt=self.attempt,
            session_id=self.session_id,
            input=self.input,
            state_json=self.state_json,
            idempotency_key=key,
            output_session_id=self.output_session_id,
            before_write=self.line.flush,
            workflow=self.workflow,
        )

    async def _advance(self, spec: StepPlan, ctx: LiveContext, out: Outcome) -> bool:
        """Commit a completed step; True when the run goes on to another step in this claim."""
        sets: dict[str, Any] = {"state": out.state_json}
        if ctx.output_session_id is not None:
            sets["output_session_id"] = ctx.output_session_id
        events: list[EventSpec] = [("step.completed", {"step": spec.name, "visit": self.visit, "next": out.next_step})]
        checkpoint: StepCheckpoint | None = None
        if spec.checkpoint or out.next_step is None:
            events.append(("checkpoint.created", {"step": spec.name, "next_step": out.next_step}))
            checkpoint = (out.state_json, out.next_step, [])
        output_session: NewSession | None = None
        if out.next_step is None:
            sets.update(RELEASE, status="succeeded", error=None, result=out.result_json)
            # every succeeded run has an output session: its steps', else its input session, else a new
            # empty one, made by this same commit (one write, and none without the run's success)
            output_id = ctx.output_session_id or self.session_id
            if output_id is not None:
                sets["output_session_id"] = output_id
            else:
                output_session = SessionService.new_empty({"run_id": self.run_id})
            events.append(("run.state.changed", {"status": "succeeded"}))
        else:
            sets.update(step=out.next_step, visit=self.visit + 1, attempt=1, lost_leases=0)
            events.append(("step.started", {"step": out.next_step, "visit": self.visit + 1, "attempt": 1}))
        following = self.plan.steps.get(out.next_step) if out.next_step is not None else None
        if following is not None and spec.effects in CHAINED and following.effects in CHAINED:
            await self.line.hold(HeldStep(self._stamped(sets), events, checkpoint))
        else:
            await self._commit(sets, events, checkpoint=checkpoint, output_session=output_session)
        self.state_json, self.attempt = out.state_json, 1
        self.output_session_id = sets.get("output_session_id", self.output_session_id)
        if out.next_step is None:
            return False
        self.step, self.visit = out.next_step, self.visit + 1
        return True

    async def _fail(self, spec: StepPlan, ctx: LiveContext, error: str) -> None:
        failed = {"step": spec.name, "visit": self.visit, "attempt": self.attempt, "error": error}
        if ctx.in_flight:
            note = (
                f"step {spec.name!r} failed ({error}) while non-idempotent effect(s) {sorted(ctx.in_flight)} were in "
                "flight; resolve each with resolve_effect(effect_id, 'applied'|'not_applied')"
            )
            events: list[EventSpec] = [("step.failed", failed)]
            sets = {**RELEASE, "status": "needs_review", "error": note}
            events_tail: list[EventSpec] = [("run.state.changed", {"status": "needs_review"})]
            return await self._commit(sets, events, settle=True, tail=events_tail)
        if self.attempt < spec.retry.max_attempts:
            delay = spec.retry.delay(self.attempt)
            events = [("step.failed", {**failed, "retry_in_s": delay})]
            events.append(("run.state.changed", {"status": "queued", "reason": "retry"}))
            sets = {
                **RELEASE,
                "status": "queued",
                "attempt": self.attempt + 1,
                "error": error,
            }
            return await self._commit(sets, events, settle=True, retry_in_s=delay)
        events = [("step.failed", failed), ("run.state.changed", {"status": "failed"})]
        message = f"step {spec.name!r} failed after {self.attempt} attempt(s): {error}"
        await self._commit({**RELEASE, "status": "failed", "error": message}, events, settle=True)

    async def _end(self, status: str, error: str) -> None:
        events: list[EventSpec] = [("run.state.changed", {"status": status, "reason": error})]
        await self._commit({**RELEASE, "status": status, "error": error}, events, settle=True)
