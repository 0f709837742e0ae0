"""The ``StepContext`` a running step gets: effect ledger, interrupts, progress, output session.

Every write here is guarded by the run's fencing token (``guarded_update``) and shielded from
cancellation, so a record is either fully committed or not at all, and a worker that lost its
lease can record nothing. Effects and interrupts are keyed by the step *visit* (stable across
retries and resumes), effects by their key and interrupts by their order within the step: a
step re-run after an interrupt replays its completed effects and finds each interrupt's own
decision.
"""

from __future__ import annotations

import inspect
import json
import sqlite3
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar, get_args

import anyio
import anyio.to_thread

from runtime.durable.models import Interrupt
from runtime.errors import InterruptRaised, InvalidInputError, RunFailure
from runtime.flow.workflow import Decision, EffectClass, InterruptKind, StepContext
from runtime.ids import new_id, now
from runtime.store.sqlite.durable import EventSpec, dumps, guarded_update

if TYPE_CHECKING:
    from runtime.runtime import Runtime

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
LEDGERED = (EffectClass.IDEMPOTENT, EffectClass.NON_IDEMPOTENT)


class LiveContext(StepContext):
    """One step execution's context, bound to the lease it runs under."""

    def __init__(
        self,
        runtime: Runtime,
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
    ) -> None:
        self.runtime = runtime
        self.run_id = run_id
        self.token = token
        self.step = step
        self.visit = visit
        self.attempt = attempt
        self.session_id = session_id
        self.input = input
        self.idempotency_key = idempotency_key
        self.state_json = state_json
        self.output_session_id: str | None = None
        self.in_flight: set[str] = set()
        self._effects: dict[str, sqlite3.Row] | None = None
        self._interrupts: dict[int, Interrupt] | None = None
        self._ordinal = 0

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with anyio.CancelScope(shield=True):
            result = await self.runtime.db.write(fn)
        return result

    # -- effects -----------------------------------------------------------------------------
    async def _known_effects(self) -> dict[str, sqlite3.Row]:
        if self._effects is None:
            rows = await self.runtime.db.read(
                lambda c: c.execute(
                    "SELECT * FROM run_effects WHERE run_id = ? AND visit = ?", (self.run_id, self.visit)
                ).fetchall()
            )
            self._effects = {r["key"]: r for r in rows}
        return self._effects

    async def begin_effect(self, key: str, effect_class: EffectClass) -> tuple[bool, Any, str]:
        """``(True, result, id)`` for a completed effect (replay), else ``(False, None, id)`` once dispatched."""
        if not isinstance(key, str) or not key:
            raise InvalidInputError("an effect key must be a non-empty string naming the effect within its step")
        known = (await self._known_effects()).get(key)
        if known is not None and known["status"] == "succeeded":
            return True, json.loads(known["result"]) if known["result"] is not None else None, known["id"]
        if known is not None and known["status"] == "ambiguous":
            raise RunFailure(f"effect {key!r} ({known['id']}) is ambiguous; resolve it first", run_id=self.run_id)
        effect_id = known["id"] if known is not None else new_id("eff")
        if effect_class in LEDGERED:
            await self._write(lambda c: self._record(c, effect_id, key, effect_class, "dispatched", None, None))
            if effect_class is EffectClass.NON_IDEMPOTENT:
                self.in_flight.add(effect_id)
        return False, None, effect_id

    async def finish_effect(
        self, effect_id: str, key: str, effect_class: EffectClass, result: Any, error: str | None
    ) -> Any:
        """Record the outcome of a dispatched effect; returns the result as stored (JSON round trip)."""
        if error is not None:
            await self._write(lambda c: self._record(c, effect_id, key, effect_class, "failed", None, error))
            self.in_flight.discard(effect_id)
            return None
        try:
            result_json = dumps(result)
        except (TypeError, ValueError) as exc:
            # It ran, but we cannot store what it returned: nobody may run it again blindly.
            why = str(exc)
            await self._write(lambda c: self._record(c, effect_id, key, effect_class, "ambiguous", None, why))
            self.in_flight.discard(effect_id)
            raise InvalidInputError(f"effect {key!r} returned a value that is not JSON-serialisable: {why}") from None
        await self._write(lambda c: self._record(c, effect_id, key, effect_class, "succeeded", result_json, None))
        self.in_flight.discard(effect_id)
        return json.loads(result_json)

    def _record(
        self,
        conn: sqlite3.Connection,
        effect_id: str,
        key: str,
        effect_class: EffectClass,
        status: str,
        result_json: str | None,
        error: str | None,
    ) -> None:
        guarded_update(conn, self.run_id, self.token, {}, [(f"effect.{status}", {"effect_id": effect_id, "key": key})])
        at = now()
        conn.execute(
            "INSERT INTO run_effects (id, run_id, tenant, project, step, visit, key, effect_class, status, result, "
            "error, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE "
            "SET status = excluded.status, result = excluded.result, error = excluded.error, "
            "effect_class = excluded.effect_class, updated_at = excluded.updated_at",
            (effect_id, self.run_id, self.runtime.tenant, self.runtime.project, self.step, self.visit, key,
             effect_class.value, status, result_json, error, at, at),
        )  # fmt: skip
        row = conn.execute("SELECT * FROM run_effects WHERE id = ?", (effect_id,)).fetchone()
        if self._effects is not None:
            self._effects[key] = row

    async def effect(
        self, key: str, fn: Callable[[], Any], effect_class: EffectClass | str = EffectClass.NON_IDEMPOTENT
    ) -> Any:
        cls = EffectClass(effect_class)
        replay, result, effect_id = await self.begin_effect(key, cls)
        if replay:
            return result
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
            rows = await self.runtime.db.read(
                lambda c: c.execute(
                    "SELECT * FROM run_interrupts WHERE run_id = ? AND visit = ?", (self.run_id, self.visit)
                ).fetchall()
            )
            self._interrupts = {r["ordinal"]: Interrupt.from_row(r) for r in rows}
        known = self._interrupts.get(ordinal)
        if known is not None:
            if known.status == "decided" and known.decision is not None:
                return known.decision
            if known.status == "expired":
                raise RunFailure(f"interrupt {known.id} expired undecided", run_id=self.run_id, step=self.step)
            raise InterruptRaised(known.id)
        interrupt_id = new_id("int")
        await self._write(lambda c: self._park(c, interrupt_id, ordinal, kind, prompt, schema, timeout_s))
        raise InterruptRaised(interrupt_id)

    def _park(
        self,
        conn: sqlite3.Connection,
        interrupt_id: str,
        ordinal: int,
        kind: str,
        prompt: str,
        schema: dict[str, Any] | None,
        timeout_s: float | None,
    ) -> None:
        at = now()
        events: list[EventSpec] = [
            ("interrupt.created", {"interrupt_id": interrupt_id, "kind": kind, "step": self.step}),
            ("checkpoint.created", {"step": self.step, "pending": [interrupt_id]}),
            ("run.state.changed", {"status": "waiting", "interrupt_id": interrupt_id}),
        ]
        sets = {"status": "waiting", "lease_owner": None, "lease_expires": None}
        guarded_update(
            conn, self.run_id, self.token, sets, events, checkpoint=(self.state_json, self.step, [interrupt_id])
        )
        conn.execute(
            "INSERT INTO run_interrupts (id, run_id, tenant, project, step, visit, ordinal, kind, prompt, schema, "
            "status, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
            (interrupt_id, self.run_id, self.runtime.tenant, self.runtime.project, self.step, self.visit, ordinal,
             kind, prompt, dumps(schema) if schema is not None else None, at + timeout_s if timeout_s else None, at),
        )  # fmt: skip

    # -- the rest ----------------------------------------------------------------------------
    def set_output_session(self, session_id: str) -> None:
        self.output_session_id = session_id

    async def progress(self, message: str) -> None:
        events: list[EventSpec] = [("step.progress", {"step": self.step, "message": str(message)})]
        await self._write(lambda c: guarded_update(c, self.run_id, self.token, {}, events))
        self.runtime.runs.notify(self.run_id)
