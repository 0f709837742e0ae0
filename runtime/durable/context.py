"""The ``StepContext`` a running step gets: effect ledger, interrupts, progress, output session.

Every write here is guarded by the run's fencing token (the ``RunStore``'s fenced methods) and shielded from
cancellation, so a record is either fully committed or not at all, and a worker that lost its
lease can record nothing. Effects and interrupts are keyed by the step *visit* (stable across
retries and resumes), effects by their key and interrupts by their order within the step: a
step re-run after an interrupt replays its completed effects and finds each interrupt's own
decision.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from functools import partial
from typing import Any, TypeVar, get_args

import anyio
import anyio.to_thread

from runtime.durable.engine import Engine
from runtime.durable.models import Decision, Effect, Interrupt, InterruptKind
from runtime.durable.outage import once_reachable
from runtime.durable.store import EffectRecord, EventSpec, NewInterrupt, RunStore, StepCommit, dumps
from runtime.durable.traced import NO_SPAN, effect_span
from runtime.durable.transcript import decision_chunks
from runtime.errors import InterruptRaised, InvalidInputError, RunFailure
from runtime.flow.policy_gate import effect_gate
from runtime.flow.workflow import EffectClass, StepContext
from runtime.ids import new_id, now
from runtime.policy import POLICY_KEY
from runtime.telemetry import Span

T = TypeVar("T")

#: The run whose steps the current task is executing (set by the worker for the whole drive).
CURRENT_RUN: ContextVar[str | None] = ContextVar("rath_current_run", default=None)


def current_run_id() -> str | None:
    """The id of the run this code executes in, or None outside a run.

    Lets a layer that serves many runs at once (the MCP server's ``sampling`` provider) tell whose
    model call it is handling without every call site passing the id along.
    """
    return CURRENT_RUN.get()


KINDS: tuple[str, ...] = get_args(InterruptKind)


class LiveContext(StepContext):
    """One step execution's context, bound to the lease it runs under; its writes go to the run's own
    ``store``, and ``runtime`` is what the engine hands steps (``Engine.services``)."""

    def __init__(
        self,
        engine: Engine,
        store: RunStore,
        *,
        run_id: str,
        token: int,
        step: str,
        visit: int,
        attempt: int,
        session_id: str | None,
        input: dict[str, Any],
        state_json: str,
        idempotency_key: str | None,
        output_session_id: str | None = None,
        before_write: Callable[[], Awaitable[None]] | None = None,
        workflow: str | None = None,
    ) -> None:
        self.engine = engine
        self.store = store
        self.runtime = engine.services
        self.workflow = workflow  # the run's, for policy rules that name one
        self._governed = engine.services.policy.policy.governs("effect")
        self.tracing = engine.tracing
        self.span: Span = NO_SPAN  # the step's span (the runner's): interrupts are events on it
        self._redact = engine.services.secrets.redactor.text  # what this step writes never holds a secret
        self._before_write = before_write  # commits the run's held steps first (held.py)
        self.run_id = run_id
        self.token = token
        self.step = step
        self.visit = visit
        self.attempt = attempt
        self.session_id = session_id
        self.input = input
        self.idempotency_key = idempotency_key
        self.state_json = state_json
        self.output_session_id: str | None = output_session_id
        self.output_session_set = False
        self.in_flight: set[str] = set()
        self._effects: dict[str, Effect] | None = None
        self._interrupts: dict[int, Interrupt] | None = None
        self._ordinal = 0

    async def _write(self, write: Callable[[], Awaitable[T]]) -> T:
        """Make a fenced write, after the run's held steps; made again once a store that cannot be
        reached is back (``outage.py``): each try shielded, the pauses between them not."""
        if self._before_write is not None:
            await self._before_write()  # shielded itself, and waits out an outage the same way

        async def shielded() -> T:
            with anyio.CancelScope(shield=True):
                result = await write()
            return result

        return await once_reachable(shielded, f"run {self.run_id}'s step {self.step!r}")

    def _read(self, read: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        """A read of the run's own ledger, made again once a store that cannot be reached is back."""
        return once_reachable(read, f"run {self.run_id}'s step {self.step!r}")

    # -- effects -----------------------------------------------------------------------------
    async def _known_effects(self) -> dict[str, Effect]:
        if self._effects is None:
            effects = await self._read(partial(self.store.visit_effects, self.run_id, self.visit))
            self._effects = {e.key: e for e in effects}
        return self._effects

    async def begin_effect(self, key: str, effect_class: EffectClass) -> tuple[bool, Any, str]:
        """``(True, result, id)`` for a completed effect (replay), else ``(False, None, id)`` once dispatched."""
        if not isinstance(key, str) or not key:
            raise InvalidInputError("an effect key must be a non-empty string naming the effect within its step")
        known = (await self._known_effects()).get(key)
        if known is not None and known.status == "succeeded":
            return True, known.result, known.id
        if known is not None and known.status == "ambiguous":
            raise RunFailure(f"effect {key!r} ({known.id}) is ambiguous; resolve it first", run_id=self.run_id)
        effect_id = known.id if known is not None else new_id("eff")
        # Only a non-idempotent effect is recorded before it runs (a write of its own): one caught in flight
        # by a crash must not run again blindly. Any other is simply run again, so its outcome is all the
        # ledger needs (``finish_effect``).
        if effect_class is EffectClass.NON_IDEMPOTENT:
            await self._record(effect_id, key, effect_class, "dispatched", None, None)
            self.in_flight.add(effect_id)
        return False, None, effect_id

    async def finish_effect(
        self, effect_id: str, key: str, effect_class: EffectClass, result: Any, error: str | None
    ) -> Any:
        """Record the outcome of a dispatched effect; returns the result as stored (JSON round trip)."""
        if error is not None:
            await self._record(effect_id, key, effect_class, "failed", None, error)
            self.in_flight.discard(effect_id)
            return None
        try:
            result_json = dumps(result)
        except (TypeError, ValueError) as exc:
            # It ran, but we cannot store what it returned: nobody may run it again blindly.
            why = str(exc)
            await self._record(effect_id, key, effect_class, "ambiguous", None, why)
            self.in_flight.discard(effect_id)
            raise InvalidInputError(f"effect {key!r} returned a value that is not JSON-serialisable: {why}") from None
        await self._record(effect_id, key, effect_class, "succeeded", result_json, None)
        self.in_flight.discard(effect_id)
        return json.loads(result_json)

    async def _record(
        self,
        effect_id: str,
        key: str,
        effect_class: EffectClass,
        status: str,
        result_json: str | None,
        error: str | None,
    ) -> None:
        redact = self._redact
        result_json, error = result_json and redact(result_json), error and redact(error)
        record = EffectRecord(effect_id, self.step, self.visit, key, effect_class.value, status, result_json, error)
        stored = await self._write(partial(self.store.record_effect, self.run_id, self.token, record))
        if self._effects is not None:
            self._effects[key] = stored

    async def gate_effect(self, key: str) -> None:
        """config.json's policy over effect ``key``, asked before it runs or replays (in this task, or for a
        sync step's child: ``isolate.py``); the policy's own audit effects and decision transcripts aside."""
        if self._governed and not key.startswith((POLICY_KEY, "decision:")):
            await effect_gate(self, key, self.workflow)

    async def effect(
        self, key: str, fn: Callable[[], Any], effect_class: EffectClass | str = EffectClass.NON_IDEMPOTENT
    ) -> Any:
        cls = EffectClass(effect_class)
        await self.gate_effect(key)
        with effect_span(self.tracing, key, cls.value) as span:
            replay, result, effect_id = await self.begin_effect(key, cls)
            span.set("rath.effect.id", effect_id)
            if replay:
                span.set("rath.effect.outcome", "replayed")
                return result
            try:
                value = await self._run_effect(effect_id, key, cls, fn)
            except Exception:
                span.set("rath.effect.outcome", "failed")  # the span's error.type: the exception's class
                raise
            span.set("rath.effect.outcome", "succeeded")
            return value

    async def _run_effect(self, effect_id: str, key: str, cls: EffectClass, fn: Callable[[], Any]) -> Any:
        try:
            if inspect.iscoroutinefunction(fn):
                value: Any = await fn()
            else:
                # A cancel or timeout must not wait for a blocking function: the effect stays
                # ``dispatched`` and is settled like a crash (ambiguous if non-idempotent).
                value = await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:
            await self.finish_effect(effect_id, key, cls, None, f"{type(exc).__name__}: {exc}")
            raise
        return await self.finish_effect(effect_id, key, cls, value, None)

    # -- interrupts --------------------------------------------------------------------------
    async def interrupt(
        self,
        kind: InterruptKind,
        prompt: str = "",
        schema: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Decision:
        if kind not in KINDS:
            raise InvalidInputError(f"interrupt kind {kind!r} is not one of {list(KINDS)}")
        if timeout_s is not None and timeout_s <= 0:
            raise InvalidInputError(f"timeout_s must be a positive number of seconds, got {timeout_s}")
        ordinal, self._ordinal = self._ordinal, self._ordinal + 1
        if self._interrupts is None:
            self._interrupts = await self._read(partial(self.store.visit_interrupts, self.run_id, self.visit))
        known = self._interrupts.get(ordinal)
        if known is not None:
            if known.status == "decided" and known.decision is not None:
                decided = {"rath.interrupt.id": known.id, "rath.interrupt.action": known.decision.action}
                self.span.event("interrupt.decided", {**decided, "rath.interrupt.actor": known.decision.actor})
                await self._note_decision(known, known.decision)
                return known.decision
            if known.status == "expired":
                self.span.event("interrupt.expired", {"rath.interrupt.id": known.id})
                raise RunFailure(f"interrupt {known.id} expired undecided", run_id=self.run_id, step=self.step)
            raise InterruptRaised(known.id)
        interrupt_id = new_id("int")
        expires_at = now() + timeout_s if timeout_s else None
        prompt = self._redact(prompt)
        new = NewInterrupt(interrupt_id, self.step, self.visit, ordinal, kind, prompt, schema, expires_at)
        await self._write(partial(self.store.park, self.run_id, self.token, new, self.state_json))
        self.span.event("interrupt.asked", {"rath.interrupt.id": interrupt_id, "rath.interrupt.kind": kind})
        raise InterruptRaised(interrupt_id)

    async def _note_decision(self, interrupt: Interrupt, decision: Decision) -> None:
        """Write the question and its decision into the run's session, once (see ``runtime.durable.transcript``)."""
        sessions, base = self.runtime.sessions, self.output_session_id or self.session_id
        chunks, meta = decision_chunks(interrupt, decision), {"run_id": self.run_id, "interrupt_id": interrupt.id}

        async def write() -> str:
            if base is None:
                return (await sessions.create(chunks, metadata=meta)).id
            return (await sessions.append(base, chunks, op="run", metadata=meta)).id

        self.set_output_session(await self.effect(f"decision:{interrupt.id}", write, EffectClass.IDEMPOTENT))

    # -- the rest ----------------------------------------------------------------------------
    def set_output_session(self, session_id: str) -> None:
        self.output_session_id = session_id
        self.output_session_set = True

    async def progress(self, message: str) -> None:
        events: list[EventSpec] = [("step.progress", {"step": self.step, "message": self._redact(str(message))})]
        await self._write(partial(self.store.commit, StepCommit(self.run_id, self.token, {}, events)))
        self.engine.notify(self.run_id)

    async def text(self, piece: str) -> None:
        """A piece of a model's text as it is generated (an agent's ``on_delta``): a ``step.text``
        event, so whoever waits on the run, in any process on the store, can show it at once."""
        if not piece:
            return
        events: list[EventSpec] = [("step.text", {"step": self.step, "text": self._redact(str(piece))})]
        await self._write(partial(self.store.commit, StepCommit(self.run_id, self.token, {}, events)))
        self.engine.notify(self.run_id)
