"""Call one step's code under its limits, and say what came of it (``call_step`` -> ``Outcome``).

The step's own code runs here (``async``, ``def`` on a thread via ``isolate.py``, a router's choice,
a ``forward`` over sessions) in a cancel scope that the step's timeout, the run's deadline and the
claim (``Lease``: a cancel request, a lost lease) can each end. Whatever it returned, raised or was
stopped by becomes an ``Outcome``. Nothing here writes the run: what an outcome commits is the
runner's (``runner.py``).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import anyio

from runtime.durable.context import LiveContext
from runtime.durable.isolate import run_sync_step
from runtime.durable.plan import Plan, StepPlan
from runtime.durable.store import dumps
from runtime.errors import CommitUnknownError, InterruptRaised, InvalidInputError, LeaseLostError, RunFailure
from runtime.ids import now
from runtime.scopes import cancel_scope
from runtime.sessions.model import SessionInfo


@dataclass
class Lease:
    """A claim this process holds on a run; cancelling it stops the running step."""

    run_id: str
    token: int
    scope: anyio.CancelScope | None = None
    cancel_reason: str | None = None
    cancelled: bool = False
    lost: bool = False

    def cancel(self, reason: str | None) -> None:
        self.cancelled, self.cancel_reason = True, reason
        if self.scope is not None:
            self.scope.cancel()

    def lose(self) -> None:
        self.lost = True
        if self.scope is not None:
            self.scope.cancel()


@dataclass
class Outcome:
    kind: Literal["ok", "failed", "parked", "cancelled", "deadline", "lost"]
    state_json: str = ""
    next_step: str | None = None
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    result_json: str = "null"


async def call_step(plan: Plan, spec: StepPlan, ctx: LiveContext, lease: Lease, deadline: float | None) -> Outcome:
    """Run step ``spec`` of ``plan`` with ``ctx`` (its state, input and session are the context's) until it
    ends, its timeout or the run's ``deadline`` passes, or ``lease`` is cancelled or lost."""
    limit = float("inf")
    if spec.timeout_s is not None:
        limit = spec.timeout_s
    if deadline is not None:
        limit = min(limit, deadline - now())
    out: Outcome | None = None
    scope_deadline = anyio.current_time() + limit if limit != float("inf") else limit
    with cancel_scope(deadline=scope_deadline) as scope:
        lease.scope = scope
        if lease.cancelled or lease.lost:
            scope.cancel()
        try:
            out = await _call(plan, spec, ctx, json.loads(ctx.state_json))
        except InterruptRaised:
            out = Outcome("parked")
        except LeaseLostError:
            out = Outcome("lost")
        except CommitUnknownError:
            raise  # not the step's failure: its worker hands the run back
        except RunFailure as exc:
            out = Outcome("failed", error=str(exc))
        except Exception as exc:
            out = Outcome("failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            lease.scope = None
    if out is not None:
        return out
    if lease.lost:
        return Outcome("lost")
    if lease.cancelled:
        return Outcome("cancelled")
    if deadline is not None and now() >= deadline:
        return Outcome("deadline")
    return Outcome("failed", error=f"step {spec.name!r} timed out after {spec.timeout_s}s")


async def _call(plan: Plan, spec: StepPlan, ctx: LiveContext, state: Any) -> Outcome:
    if spec.kind == "forward":
        return await _forward(plan, ctx, state)
    method = plan.method(spec.name)
    if spec.is_async:
        value = await method(state, ctx)
    else:
        value, session = await run_sync_step(method, state, ctx)
        if session is not None:
            ctx.set_output_session(session)
    if spec.kind == "router":
        if value not in spec.successors:
            raise InvalidInputError(
                f"router {spec.name!r} returned {value!r}; it must return one of {list(spec.successors)}"
            )
        return Outcome("ok", state_json=ctx.state_json, next_step=value)
    nxt = spec.successors[0] if spec.successors else None
    state_json = _check_state(spec, value)
    if nxt is None:
        return Outcome("ok", state_json=state_json, result_json=await _result(plan, state_json))
    return Outcome("ok", state_json=state_json, next_step=nxt)


def _check_state(step: StepPlan, value: Any) -> str:
    if not isinstance(value, dict):
        raise InvalidInputError(
            f"step {step.name!r} returned {type(value).__name__}; a step returns the new state dict"
        )
    try:
        return dumps(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"step {step.name!r} returned a state that is not JSON-serialisable: {exc}") from None


async def _result(plan: Plan, state_json: str) -> str:
    """The workflow's ``result(state)`` of the final state, as JSON (a failure fails the last step)."""
    value = plan.workflow.result(json.loads(state_json))
    if inspect.isawaitable(value):
        value = await value
    try:
        return dumps(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"result() of {plan.name} is not JSON-serialisable: {exc}") from None


async def _forward(plan: Plan, ctx: LiveContext, state: Any) -> Outcome:
    sessions = ctx.runtime.sessions  # the run's scope's: the worker entered it
    if ctx.session_id is not None:
        session = await sessions.get(ctx.session_id)
    else:
        message = ctx.input.get("message")
        chunks = [{"kind": "user", "content": str(message)}] if message else []
        created: str = await ctx.effect("forward.input_session", partial(_created, sessions, chunks), "idempotent")
        session = await sessions.get(created)
    result = await plan.workflow.forward(session, ctx)  # type: ignore[attr-defined]
    if not isinstance(result, SessionInfo):
        raise InvalidInputError(f"forward() of {plan.name} returned {type(result).__name__}; return a Session")
    ctx.set_output_session(result.id)
    state_json = dumps({**state, "output_session_id": result.id})
    return Outcome("ok", state_json=state_json, next_step=None, result_json=await _result(plan, state_json))


async def _created(sessions: Any, chunks: list[dict[str, Any]]) -> str:
    return str((await sessions.create(chunks)).id)
