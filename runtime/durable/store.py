"""What durable execution needs from a store: the ``RunQueue`` and ``RunStore`` protocols and the records
they speak (what every backend says and decides alike is in ``store_shared``).

Every method is one whole unit of work on the store (one transaction, one round trip where the
backend can): a write is all or nothing, a read one consistent snapshot. A ``RunStore`` is scoped
to one tenant/project; the store's ``RunQueue`` (``StoreBackend.queue()``) serves all of them.
Implementation: ``runtime.store.core.runs``, on SQLite (the embedded default) and PostgreSQL;
``tests/store/contracts/`` says what each must do.

Fencing: a worker's claim gives the run a new, higher ``token``; every change made under a lease
(``commit``, ``record_effect``, ``park``) names that token and is rejected with ``LeaseLostError``
(changing nothing) unless the run is still ``running`` under exactly that token. So a worker
that lost its lease can never commit.

Takeover: a claim records its ``Holder`` (the claiming process). A worker that sees a holder of its
own host gone (``runtime.durable.owner``) calls ``take_over``, which requeues that holder's runs as
the reaper does for an expired lease; the next claim bumps the token, so the dead holder's late
commit (a process that was only frozen, say) is still rejected.

Concurrency: ``claim`` and ``next_ready`` take ``limits`` (workflow name -> N): at most N runs of
that workflow are ``running`` at once per ``concurrency_key`` (the key a run was created with;
runs without one share a group), however many workers and processes claim. A queued run whose
group is full is skipped, and the others behind it in its group wait their turn (first in, first
out by ``next_at``). Only ``running`` holds a slot: a run waiting on an interrupt, or for a retry,
does not. The running runs counted are those the claimer serves: the store's ``RunQueue`` (every worker
claims through it) counts the whole store, every scope, as CONTRACT asks; a scoped store its scope.

Changes to a run are given as ``RunChange``: run fields (the keys of ``RUN_FIELDS``) to set. Events
are ``(type, data)`` pairs; the store numbers them (``seq``) in order after the run's last event.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from anyio.abc import TaskStatus

from runtime.durable.compact_json import dumps as dumps  # re-exported: the stores write with it
from runtime.durable.models import Decision, Effect, Event, Interrupt, Run
from runtime.sessions.store import NewSession

EventSpec = tuple[str, dict[str, Any]]
RunChange = Mapping[str, Any]

#: The fields of a run a change may set (anything else is a programming error the store refuses).
RUN_FIELDS: frozenset[str] = frozenset(
    {
        "status", "state", "step", "visit", "attempt", "error", "next_at", "plan_hash", "output_session_id", "result",
        "lease_owner", "lease_expires", "lost_leases", "cancel_requested", "cancel_reason", "trace_context",
    }
)  # fmt: skip

#: Sets that give a run's lease up (the run leaves its worker).
RELEASE: dict[str, Any] = {"lease_owner": None, "lease_expires": None}

MAX_LOST_LEASES = 3
"""A step visit whose worker vanished this many times fails the run instead of killing worker after worker
(a lease its worker gave up on shutdown, ``RunQueue.release``, is handed on without counting)."""

#: Workflow name -> how many of its runs may be running at once (per concurrency key).
Limits = Mapping[str, int]

#: ``(state_json, next_step, pending interrupt ids)`` written as a checkpoint with a commit.
StepCheckpoint = tuple[str, str | None, list[str]]


@dataclass(frozen=True)
class HeldStep:
    """A completed step's commit, held back to be made by a later commit of the same run (``RunStore.commit``'s
    ``held``): what that commit would have changed, appended and checkpointed."""

    change: RunChange
    events: Sequence[EventSpec]
    checkpoint: StepCheckpoint | None = None


@dataclass(frozen=True)
class NewRun:
    """A run to queue. With an ``idempotency_key``, ``create`` returns the run already made under it.

    ``request_hash``: the request's ``request_fingerprint``. ``state_json``: the state it starts with
    (default: its input). ``forked_from``: ``(run_id, checkpoint_seq)`` of the checkpoint a fork starts from."""

    workflow: str
    plan_hash: str
    step: str
    input_json: str
    session_id: str | None = None
    idempotency_key: str | None = None
    request_hash: str = ""
    deadline: float | None = None
    state_json: str | None = None
    forked_from: tuple[str, int] | None = None
    concurrency_key: str | None = None
    priority: int = 0
    notify_url: str | None = None
    """Where the run's summary is POSTed when it waits on a human or ends (``runtime.webhooks``), checked already."""
    trace_context: str | None = None
    """The W3C trace context (JSON: ``traceparent``, ``tracestate``) of the span that started it, if traced."""
    max_queued: int | None = None
    """Refuse the run when its tenant/project has this many queued runs already (None: no limit; not a column)."""

    def columns(self) -> dict[str, Any]:
        """The run row's own columns (every backend inserts exactly these)."""
        origin = self.forked_from
        return {
            "workflow": self.workflow,
            "plan_hash": self.plan_hash,
            "session_id": self.session_id,
            "input": self.input_json,
            "state": self.input_json if self.state_json is None else self.state_json,
            "step": self.step,
            "idempotency_key": self.idempotency_key,
            "request_hash": self.request_hash,
            "deadline": self.deadline,
            "forked_from": origin[0] if origin else None,
            "forked_from_seq": origin[1] if origin else None,
            "concurrency_key": self.concurrency_key,
            "priority": self.priority,
            "notify_url": self.notify_url,
            "trace_context": self.trace_context,
        }


def request_fingerprint(**parts: Any) -> str:
    """What identifies a request under an idempotency key: a digest of each part, by name (stored with the
    key), so that a repeated request is recognised and a different one is told which part differs."""
    return dumps({name: hashlib.sha256(dumps(value).encode()).hexdigest()[:16] for name, value in parts.items()})


@dataclass(frozen=True)
class Holder:
    """The process a claim belongs to (``runtime.durable.owner`` says whether it still lives): ``host``
    (the processes that can see each other's ``/proc``), ``pid``, ``started`` (clock ticks after boot)."""

    host: str
    pid: int
    started: int


@dataclass(frozen=True)
class Claim:
    """A run a worker has just claimed: what its runner needs, and the lease's fencing ``token``."""

    id: str
    workflow: str
    plan_hash: str
    token: int
    state_json: str
    step: str
    visit: int
    attempt: int
    session_id: str | None
    input_json: str
    deadline: float | None
    lease_expires: float
    output_session_id: str | None = None
    #: the run's scope: its worker drives it there (its sessions, effects, memory, workspace)
    tenant: str = "local"
    project: str = "default"
    #: where its spans go (``runtime.durable.traced``), and whether its last worker vanished
    trace_context: str | None = None
    lost_leases: int = 0

    @classmethod
    def from_row(cls, row: Any) -> Claim:
        """From a claimed ``runs`` row (a mapping by column name, as every backend's rows are)."""
        return cls(
            id=row["id"],
            workflow=row["workflow"],
            plan_hash=row["plan_hash"],
            token=row["lease_token"],
            state_json=row["state"],
            step=row["step"],
            visit=row["visit"],
            attempt=row["attempt"],
            session_id=row["session_id"],
            input_json=row["input"],
            deadline=row["deadline"],
            lease_expires=row["lease_expires"],
            output_session_id=row["output_session_id"],
            tenant=row["tenant"],
            project=row["project"],
            trace_context=row["trace_context"],
            lost_leases=row["lost_leases"],
        )


@dataclass(frozen=True)
class EffectRecord:
    """One state of an effect-ledger entry, written under a lease (an upsert keyed by ``id``)."""

    id: str
    step: str
    visit: int
    key: str
    effect_class: str
    status: str
    result_json: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class NewInterrupt:
    """A question a step asks; ``ordinal`` is its order within the step visit."""

    id: str
    step: str
    visit: int
    ordinal: int
    kind: str
    prompt: str
    schema: dict[str, Any] | None
    expires_at: float | None


#: Checks a pending interrupt before it is decided (the decision's value against its schema).
CheckInterrupt = Callable[[Interrupt], None]


@dataclass(frozen=True)
class ClaimOrder:
    """What ``RunQueue.claim`` is asked, for ``RunStore.commit`` to claim in the same transaction."""

    owner: str
    lease_s: float
    limit: int
    workflows: Sequence[str]
    holder: Holder | None = None
    limits: Limits | None = None


@dataclass(frozen=True)
class StepCommit:
    """One commit a worker makes under its lease (``RunStore.commit``), fenced by ``token``: change the run
    and append events (and a checkpoint, at its ``checkpoint.created`` event).

    ``held``: earlier steps' commits, made first, in order, in the same transaction (each as its own
    commit would have been, all under the same fencing check and timestamp). ``settle``: first settle
    the run's dispatched effects as ``reap`` does, their events before ``tail``. ``retry_in_s``: the run
    may be claimed again (``next_at``) that long after this commit's own timestamp, the one its events
    carry. ``output_session``: a session to create in the same transaction, in the run's tenant/project;
    the run's ``output_session_id`` becomes its id (a run's last commit makes the empty output session
    of a run whose steps made none: one write instead of two, and never a session without its run's
    success). ``then_claim``: a claim made in the same transaction (what ``RunQueue.claim`` would get)."""

    run_id: str
    token: int
    change: RunChange
    events: Sequence[EventSpec]
    settle: bool = False
    tail: Sequence[EventSpec] = ()
    checkpoint: StepCheckpoint | None = None
    retry_in_s: float | None = None
    output_session: NewSession | None = None
    then_claim: ClaimOrder | None = None
    held: Sequence[HeldStep] = ()


class RunQueue(Protocol):
    """A worker's operations on the runs it serves: readiness, claims, takeover, reaping, and its leases.

    ``StoreBackend.queue()`` serves every tenant/project of a store: one worker serves every scope, so it
    claims ready runs wherever they are (each ``Claim`` names its run's tenant and project), takes over
    ended holders' runs and reaps across all of them; what it then does for a run goes through the run's
    own scoped ``RunStore``. A ``RunStore`` is also the queue of its own scope.

    ``limits`` count the running runs of what the queue serves, per concurrency key when the run has one:
    through ``StoreBackend.queue()`` the whole store, every scope, since CONTRACT says "at most N of its runs
    execute at once across every worker of a store" and every worker claims there; through a scoped
    ``RunStore`` its scope (one scope's store never depends on another scope's rows).
    """

    async def next_ready(self, workflows: Sequence[str], *, limits: Limits | None = None) -> float | None:
        """The earliest ``next_at`` of a queued run of these workflows that ``limits`` let run (None: none)."""
        ...

    async def claim(
        self,
        owner: str,
        lease_s: float,
        limit: int,
        workflows: Sequence[str],
        *,
        holder: Holder | None = None,
        limits: Limits | None = None,
    ) -> list[Claim]:
        """Take up to ``limit`` runnable runs, earliest ``next_at`` first: each becomes ``running``
        under ``owner`` (held by ``holder``) with a new, higher token and a lease of ``lease_s``.
        No run is claimed twice, and no workflow gets more runs running than ``limits`` allow."""
        ...

    async def holders(self, host: str) -> list[tuple[int, int]]:
        """Cheap: ``(pid, started)`` of every process of ``host`` holding a running run here."""
        ...

    async def take_over(self, host: str, pid: int, started: int) -> list[str]:
        """Requeue the running runs held by that (ended) process, as ``reap`` does for an expired lease
        (``lease.taken_over`` instead of ``lease.expired``). Returns the runs touched."""
        ...

    async def needs_reaping(self) -> bool:
        """Cheap: is there an expired lease, an expired interrupt or a passed deadline?"""
        ...

    async def reap(self) -> list[str]:
        """Requeue runs whose lease expired (settling their dispatched effects: non-idempotent ones
        ambiguous and the run ``needs_review``; failing it after ``MAX_LOST_LEASES``), time out runs
        whose interrupt expired or whose deadline passed. Returns the runs touched."""
        ...

    # -- the leases workers hold: named by run id and token, so not tied to a scope ----------
    async def renew(self, leases: Sequence[tuple[str, int]], lease_s: float) -> dict[str, str]:
        """Extend the leases still held; for each, the pending cancel reason ('' for none)."""
        ...

    async def cancel_requests(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        """Of these runs, those with a cancel requested, and its reason."""
        ...

    async def release(self, leases: Sequence[tuple[str, int]]) -> None:
        """Give leases up (worker shutdown): any worker may take the runs over at once."""
        ...


class RunStore(RunQueue, Protocol):
    """Runs, events, checkpoints, leases, effects and interrupts of one tenant/project (and, as a
    ``RunQueue``, its claims, takeover and reaping)."""

    # -- starting and reading ---------------------------------------------------------------
    async def create(self, new: NewRun, events: Sequence[EventSpec]) -> str:
        """Queue a run (runnable now) with its first events; with an idempotency key already used,
        the run made under it (``ConflictError`` when its ``request_hash`` differs). Returns its id."""
        ...

    async def get(self, run_id: str) -> Run:
        """The run with its pending interrupts (oldest first); ``NotFoundError`` if not in this scope."""
        ...

    async def by_idempotency_key(self, key: str) -> str | None:
        """The id of the run this scope started with ``key``, if any."""
        ...

    async def page(self, status: str | None, workflow: str | None, before: str | None, limit: int) -> list[Run]:
        """Runs newest first (by id), filtered, with ids below ``before``; at most ``limit``."""
        ...

    async def ids(self, prefix: str, limit: int) -> list[str]:
        """Ids of runs starting with ``prefix``, newest first."""
        ...

    async def events(self, run_id: str, after_seq: int, limit: int) -> list[Event]: ...
    async def checkpoints(self, run_id: str) -> list[dict[str, Any]]:
        """``{seq, state, next_step, pending, created_at}`` of every checkpoint, oldest first."""
        ...

    async def interrupts(self, run_id: str | None) -> list[Interrupt]:
        """Pending interrupts (of one run, or of the whole scope), oldest first."""
        ...

    async def effects(self, status: str | None, run_id: str | None) -> list[Effect]:
        """Effect-ledger entries with this status (None: all), oldest first."""
        ...

    # -- steering, by the service (no lease) ------------------------------------------------
    async def cancel(self, run_id: str, reason: str | None) -> None:
        """A running run gets ``cancel_requested`` (its worker stops it); one no worker holds ends
        ``cancelled`` at once, its pending interrupts expired; a terminal run is left alone."""
        ...

    async def decide(self, interrupt_id: str, decision: Decision, check: CheckInterrupt) -> str:
        """Decide a pending interrupt (``check`` it first); a waiting run with nothing left pending is
        queued. Returns the run id. ``NotFoundError`` / ``ConflictError`` (not pending)."""
        ...

    async def settle_effect(self, effect_id: str, applied: bool, result_json: str | None) -> str:
        """Resolve an ambiguous effect (``succeeded`` with its result, or back to ``prepared``); a
        ``needs_review`` run with nothing left ambiguous is queued. Returns the run id."""
        ...

    async def note(self, run_id: str, events: Sequence[EventSpec]) -> None:
        """Append events to a run of this scope without changing it (whoever holds it): a fact
        recorded about the run, such as how a client asked for it. ``NotFoundError`` if not here."""
        ...

    # -- other processes --------------------------------------------------------------------
    async def watch(
        self,
        changed: Callable[[Sequence[str]], None],
        *,
        task_status: TaskStatus[bool],
        cancelled: Callable[[Sequence[str]], None] | None = None,
        quiet_s: float = 5.0,
    ) -> None:
        """Report runs other processes change: ``changed(run_ids)`` soon after each commit (an empty
        sequence: anything may have changed, as after a reconnect or ``quiet_s`` of silence), until
        cancelled; ``cancelled(run_ids)`` when a cancel of a running run is asked (``[]``: maybe
        missed, look at every run held). Started with ``task_group.start``: ``True`` once
        listening; ``False`` (and return) from a backend that cannot tell, whose changes the
        runtime notices by polling instead."""
        ...

    # -- under a lease (fenced) -------------------------------------------------------------
    async def commit(self, step: StepCommit) -> list[Claim]:
        """Make ``step`` (see ``StepCommit``) in one transaction; the claims its ``then_claim`` got."""
        ...

    async def visit_effects(self, run_id: str, visit: int) -> list[Effect]: ...
    async def record_effect(self, run_id: str, token: int, record: EffectRecord) -> Effect:
        """Write one state of an effect (an ``effect.<status>`` event with it); returns it as stored."""
        ...

    async def visit_interrupts(self, run_id: str, visit: int) -> dict[int, Interrupt]:
        """The interrupts of a step visit, by ordinal."""
        ...

    async def park(self, run_id: str, token: int, interrupt: NewInterrupt, state_json: str) -> None:
        """Record the interrupt and park the run: ``waiting``, lease given up, a checkpoint taken."""
        ...
