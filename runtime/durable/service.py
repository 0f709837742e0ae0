"""``rt.runs``: start, inspect, wait for, cancel and steer durable runs.

Everything here is a short transaction on the store, so any process sharing the store sees the
same runs. Changes made in this process wake local waiters at once; changes made by another
process reach them as the store reports them (``RunStore.watch``: PostgreSQL's LISTEN/NOTIFY),
else by polling every ``poll_s`` (``POLL_S`` unless the runtime is told otherwise, e.g. by
``$RATH_POLL_S``), which stays as the fallback on every store.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import Any, get_args

import anyio
from anyio.abc import TaskStatus

from runtime.durable.engine import POLL_S as POLL_S  # re-exported: where it was first defined
from runtime.durable.engine import Engine, WorkerSignals
from runtime.durable.forks import fork_run
from runtime.durable.models import (
    ACTIONS,
    OUTCOMES,
    SETTLED,
    TERMINAL,
    Decision,
    Effect,
    Event,
    Interrupt,
    Run,
    RunStatus,
)
from runtime.durable.schemas import check_schema
from runtime.durable.store import NewRun, RunStore, dumps, request_fingerprint
from runtime.durable.store_shared import idempotency_conflict
from runtime.durable.traced import context_now
from runtime.errors import InvalidInputError
from runtime.ids import check_id_search, now
from runtime.jsonvalue import check_json
from runtime.sessions.service import SessionService

WATCH_QUIET_S = 5.0  # a store's watch says "look again" after this long without a notification (or poll_s)
CANCEL_GRACE_S = 5.0
STATUSES: tuple[str, ...] = get_args(RunStatus)
PRIORITIES = range(-100, 101)


def check_priority(priority: object) -> int:
    """A run's priority: a whole number from -100 to 100 (higher is claimed first)."""
    if isinstance(priority, bool) or not isinstance(priority, int) or priority not in PRIORITIES:
        raise InvalidInputError(f"priority must be a whole number from -100 to 100, got {priority!r}")
    return priority


class RunService:
    """Durable runs of one tenant/project, reached as ``runtime.runs`` (in that scope).

    The signals (local waiters, this process's workers, the lease length, the poll interval) are the
    ``Engine``'s, shared by the services of every scope: a worker drives runs of all of them.
    ``sessions``: the same scope's sessions (a run's input session is made or checked there).
    """

    def __init__(self, engine: Engine, store: RunStore, sessions: SessionService) -> None:
        self.engine = engine
        self.store = store
        self.sessions = sessions
        self._waiters: dict[str, anyio.Event] = engine.waiters

    @property
    def lease_s(self) -> float:
        return self.engine.lease_s

    @property
    def poll_s(self) -> float:
        return self.engine.poll_s

    @property
    def workers(self) -> builtins.list[WorkerSignals]:
        return self.engine.workers

    # -- signals -----------------------------------------------------------------------------
    def notify(self, *run_ids: str) -> None:
        """Wake local waiters of these runs (called after every local commit)."""
        self.engine.notify(*run_ids)

    def _wake_workers(self) -> None:
        self.engine.wake_workers()

    async def follow_others(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Wake local waiters and workers on changes other processes commit, as far as the store can tell
        them (``RunStore.watch``); with a store that cannot, polling does it. Started (``tg.start``)
        once the store listens: a worker started after it hears the cancel of any run it claims."""
        quiet_s = max(WATCH_QUIET_S, self.poll_s)
        watch = partial(self.store.watch, self._changed_elsewhere, cancelled=self._cancelled_elsewhere, quiet_s=quiet_s)
        async with anyio.create_task_group() as tg:
            await tg.start(watch)
            task_status.started()

    def _changed_elsewhere(self, run_ids: Sequence[str]) -> None:
        self.notify(*(run_ids or list(self._waiters)))
        self._wake_workers()

    def _cancelled_elsewhere(self, run_ids: Sequence[str]) -> None:
        for worker in self.workers:
            worker.cancel_asked(run_ids)

    async def _read(self, run_id: str) -> tuple[anyio.Event, Run]:
        """The run, and the event the next local change to it sets (taken *before* reading, so no change is missed)."""
        signal = self._waiters.setdefault(run_id, anyio.Event())
        run = await self.get(run_id)
        if run.status in TERMINAL:
            self._waiters.pop(run_id, None)  # nothing will signal it any more
        return signal, run

    async def _changed(self, event: anyio.Event, timeout: float) -> None:
        """Return when ``event`` is set by a local change, or after ``timeout`` (to notice other processes)."""
        with anyio.move_on_after(max(0.0, timeout)):
            await event.wait()

    # -- starting ----------------------------------------------------------------------------
    async def check_start(
        self,
        workflow: str,
        *,
        session_id: str | None = None,
        input: dict[str, Any] | None = None,
        deadline_s: float | None = None,
    ) -> None:
        """Everything ``start`` checks before it writes, so a caller can check before it makes the input session."""
        plan = self.engine.workflows.get(workflow)
        if deadline_s is not None and not 0 < deadline_s < math.inf:
            raise InvalidInputError(f"deadline_s must be a positive number of seconds, got {deadline_s}")
        if input is not None and not isinstance(input, dict):
            raise InvalidInputError(f"input must be a JSON object, got {type(input).__name__}")
        payload = dict(input or {})
        check_json(payload, "input")
        check_schema(payload, dict(plan.input_schema) if plan.input_schema else None, f"input of {workflow}")
        plan.run_key(payload)  # a concurrency key that cannot be computed is refused before anything is written
        if session_id is not None:
            await self.sessions.info(session_id)

    async def by_idempotency_key(self, idempotency_key: str) -> Run | None:
        """The run started with this idempotency key here, if any."""
        run_id = await self.store.by_idempotency_key(idempotency_key)
        return None if run_id is None else await self.get(run_id)

    async def start(
        self,
        workflow: str,
        *,
        session_id: str | None = None,
        input: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        deadline_s: float | None = None,
        priority: int = 0,
        notify_url: str | None = None,
    ) -> Run:
        """Queue a run of ``workflow``. The same request with the same ``idempotency_key`` returns the same run.
        ``priority`` (-100..100): a higher run is claimed before a lower one, within concurrency limits.
        ``notify_url``: where its summary is POSTed when it waits on a human or ends (``runtime.webhooks``)."""
        return await self.submit(
            workflow,
            session_id=session_id,
            input=input,
            idempotency_key=idempotency_key,
            deadline_s=deadline_s,
            priority=priority,
            notify_url=notify_url,
        )

    async def submit(
        self,
        workflow: str,
        *,
        session_id: str | None = None,
        message: str | None = None,
        input: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        deadline_s: float | None = None,
        priority: int = 0,
        notify_url: str | None = None,
    ) -> Run:
        """Queue a run from ``session_id`` and/or ``message`` (a new session holding it, or appended to the
        given one). Checked first, so a refused start writes nothing.

        With an ``idempotency_key``, the request (workflow, message, session id, input, deadline) is
        fingerprinted and stored with the key: the same request again, from any process, even racing,
        returns the same run (and makes no second session); a different one is a ``ConflictError``
        naming what differs."""
        await self.check_start(workflow, session_id=session_id, input=input, deadline_s=deadline_s)
        check_priority(priority)
        payload = dict(input or {})
        asked: dict[str, Any] = {"priority": priority} if priority else {}  # keys stored before priority still match
        target = await self.engine.notify_target(workflow, notify_url)  # a refused URL: nothing written
        if notify_url is not None:
            asked["notify_url"] = notify_url
        fingerprint = request_fingerprint(
            workflow=workflow, message=message, session_id=session_id, input=payload, deadline_s=deadline_s, **asked
        )
        if idempotency_key is not None:
            existing = await self.by_idempotency_key(idempotency_key)
            if existing is not None:
                if existing.request_hash != fingerprint:
                    raise idempotency_conflict(idempotency_key, existing.id, existing.request_hash, fingerprint)
                return existing
        source = await self._input_session(session_id, message)
        plan = self.engine.workflows.get(workflow)
        new = NewRun(
            workflow=workflow,
            plan_hash=plan.plan_hash,
            step=plan.entry,
            input_json=dumps(payload),
            session_id=source,
            idempotency_key=idempotency_key,
            request_hash=fingerprint,
            deadline=now() + deadline_s if deadline_s is not None else None,
            concurrency_key=plan.run_key(payload),
            notify_url=target,
            priority=priority,
            trace_context=context_now(self.engine.tracing),  # the request's span, or the step's that started it
            max_queued=self.engine.max_queued,
        )
        created = {"workflow": workflow, "plan_hash": plan.plan_hash, "session_id": source}
        run_id = await self.store.create(new, [("run.created", created)])
        self._wake_workers()
        return await self.get(run_id)

    async def _input_session(self, session_id: str | None, message: str | None) -> str | None:
        """The session a run starts from: the given one (plus ``message``), or a new one holding ``message``."""
        if message is None:
            return session_id
        chunk = {"kind": "user", "content": message}
        if session_id is None:
            return (await self.sessions.create([chunk])).id
        return (await self.sessions.append(session_id, [chunk])).id

    async def fork(
        self, run_id: str, checkpoint_seq: int | None = None, state_patch: dict[str, Any] | None = None
    ) -> Run:
        """A new run from a checkpoint of ``run_id`` (default: its latest), its state merged with
        ``state_patch`` (a JSON merge patch), at the origin's priority and notifying its ``notify_url``; see
        ``runtime.durable.forks``."""
        traced = context_now(self.engine.tracing)
        run = await fork_run(
            self.store,
            self.engine.workflows,
            self.sessions,
            run_id,
            checkpoint_seq,
            state_patch,
            trace_context=traced,
            notify_target=self.engine.notify_target,
        )
        self._wake_workers()
        return run

    # -- reading -----------------------------------------------------------------------------
    async def get(self, run_id: str) -> Run:
        return await self.store.get(run_id)

    async def wait(self, run_id: str, timeout_s: float) -> Run:
        """Return when the run is terminal, waiting on a human, needs review, or ``timeout_s`` passed."""
        return await self._until(run_id, lambda run: run.status in SETTLED, timeout_s)

    async def _until(self, run_id: str, done: Callable[[Run], bool], timeout_s: float) -> Run:
        """Re-read the run on every change heard of (and every ``poll_s``) until ``done(run)`` or ``timeout_s``."""
        deadline = anyio.current_time() + max(0.0, timeout_s)
        while True:
            signal, run = await self._read(run_id)
            left = deadline - anyio.current_time()
            if done(run) or left <= 0:
                return run
            await self._changed(signal, min(self.poll_s, left))

    def watch(self, run_id: str) -> RunWatch:
        """``async with rt.runs.watch(id) as changes: async for run in changes: ...`` (or iterate directly).

        Yields the run now, then on every change (status, step, new events); ends after a terminal state.
        """
        return RunWatch(self, run_id)

    async def ids(self, prefix: str = "", limit: int = 100) -> builtins.list[str]:
        """Ids of this scope's runs that start with ``prefix``, newest first (for completion)."""
        check_id_search(prefix, limit)
        return await self.store.ids(prefix, limit)

    async def list(
        self, status: str | None = None, workflow: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> tuple[builtins.list[Run], str | None]:
        """Runs newest first; returns a page and the cursor of the next page (None at the end)."""
        if status is not None and status not in STATUSES:
            raise InvalidInputError(f"status {status!r} is not one of {list(STATUSES)}")
        if not 1 <= limit <= 500:
            raise InvalidInputError("limit must be between 1 and 500")
        runs = await self.store.page(status, workflow, cursor, limit + 1)
        more = len(runs) > limit
        runs = runs[:limit]
        return runs, (runs[-1].id if more and runs else None)

    async def events(self, run_id: str, after_seq: int = 0, limit: int = 100) -> builtins.list[Event]:
        if not 1 <= limit <= 1000:
            raise InvalidInputError("limit must be between 1 and 1000")
        return await self.store.events(run_id, after_seq, limit)

    async def checkpoints(self, run_id: str) -> builtins.list[dict[str, Any]]:
        """Every checkpoint of a run, oldest first: ``{seq, state, next_step, pending, session_id, created_at}``
        (``session_id``: the run's session at that point, what a fork from it starts from)."""
        return await self.store.checkpoints(run_id)

    async def interrupts(self, run_id: str | None = None) -> builtins.list[Interrupt]:
        """Pending interrupts (of one run, or of every run here), oldest first."""
        return await self.store.interrupts(run_id)

    async def effects(self, status: str | None = "ambiguous", run_id: str | None = None) -> builtins.list[Effect]:
        """Entries of the effect ledger with this status (None: all), oldest first."""
        return await self.store.effects(status, run_id)

    async def note(self, run_id: str, event: str, data: dict[str, Any]) -> None:
        """Record a fact about a run as an event (how a client asked for it, say), changing nothing else."""
        check_json(data, "data")
        await self.store.note(run_id, [(event, data)])
        self.notify(run_id)

    # -- steering ----------------------------------------------------------------------------
    async def cancel(self, run_id: str, reason: str | None = None) -> Run:
        """Cancel a run. A running step is stopped (preemptively for sync steps); returns once it stopped
        or after a short grace (a worker in another process hears of it through the store's watch, else
        at its next cancel poll)."""
        await self.store.cancel(run_id, reason)
        for worker in self.workers:
            worker.cancel_local(run_id, reason)
        self.notify(run_id)
        run = await self._until(run_id, lambda run: run.status != "running", CANCEL_GRACE_S)
        if run.status != "running" and not run.terminal:
            # its step parked (or was requeued) just as the cancel came: nobody holds it now, so it ends here
            await self.store.cancel(run_id, reason)
            self.notify(run_id)
            run = await self.get(run_id)
        return run

    async def resolve_interrupt(
        self, interrupt_id: str, action: str, value: Any = None, reason: str | None = None, actor: str = "user"
    ) -> Run:
        """Decide a pending interrupt; its run is queued to resume (the step re-runs, effects replay)."""
        check_json(value, "value")
        if action not in ACTIONS:
            raise InvalidInputError(f"action {action!r} is not one of {list(ACTIONS)}")
        decision = Decision(action=action, value=value, actor=actor, reason=reason)  # type: ignore[arg-type]

        def check(interrupt: Interrupt) -> None:
            if action in ("edit", "respond"):
                check_schema(value, interrupt.schema_, f"the value of interrupt {interrupt_id}")

        run_id = await self.store.decide(interrupt_id, decision, check)
        self._wake_workers()
        self.notify(run_id)
        return await self.get(run_id)

    async def resolve_effect(self, effect_id: str, outcome: str, result: Any = None) -> Run:
        """Settle an ambiguous effect: ``applied`` (with its result, replayed from now on) or ``not_applied``
        (run it again). When none is left ambiguous, a ``needs_review`` run is queued to go on."""
        check_json(result, "result")
        if outcome not in OUTCOMES:
            raise InvalidInputError(f"outcome {outcome!r} is not one of {list(OUTCOMES)}")
        try:
            result_json = dumps(result) if outcome == "applied" else None
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"result must be JSON-serialisable: {exc}") from None
        run_id = await self.store.settle_effect(effect_id, outcome == "applied", result_json)
        self._wake_workers()
        self.notify(run_id)
        return await self.get(run_id)


class RunWatch:
    """Async iterator (and async context manager) over a run's changes."""

    def __init__(self, service: RunService, run_id: str) -> None:
        self.service = service
        self.run_id = run_id
        self._last: tuple[str, str | None, int] | None = None
        self._done = False

    async def __aenter__(self) -> RunWatch:
        await self.service.get(self.run_id)  # fail fast on an unknown id
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._done = True

    def __aiter__(self) -> AsyncIterator[Run]:
        return self

    async def __anext__(self) -> Run:
        while not self._done:
            signal, run = await self.service._read(self.run_id)
            key = (run.status, run.step, run.last_seq)
            if key != self._last:
                self._last = key
                self._done = run.status in TERMINAL
                return run
            await self.service._changed(signal, self.service.poll_s)
        raise StopAsyncIteration


__all__ = ["RunService", "RunWatch"]
