"""Public definitions of durable workflows: ``Workflow``, ``@step``, ``@router``, ``EffectClass``, ``StepContext``.

A workflow is a class whose methods, decorated with ``@step`` or ``@router``, form a graph (it may
branch and loop). Compiling it (``runtime.durable.plan.compile_workflow``) gives an immutable plan
with a definition hash; the durable layer runs that plan step by step, committing state, events
and a checkpoint after each step::

    class Draft(Workflow):
        \"\"\"Draft a change and ask a human before applying it.\"\"\"

        @step(entry=True, effects=EffectClass.READ_ONLY, successors=["apply"])
        async def draft(self, state: dict, ctx: StepContext) -> dict: ...

        @step(effects=EffectClass.NON_IDEMPOTENT, idempotency_key="apply:{run_id}")
        async def apply(self, state: dict, ctx: StepContext) -> dict:
            decision = await ctx.interrupt("approval", prompt="Apply it?")
            ...

A class that defines ``async def forward(self, session, ctx)`` and no steps runs as one opaque
durable step. Unlike OpenRath 2.0.0, a subclass with its own ``__init__`` need not call
``super().__init__()``: the base class keeps no per-instance state.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import anyio.to_thread

from runtime.durable.models import Decision, DecisionAction, InterruptKind
from runtime.errors import InvalidInputError

if TYPE_CHECKING:
    from runtime.flow.services import Services

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

STEP_ATTR = "__rath_step__"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while piece := source.read(1024 * 1024):
            digest.update(piece)
    return digest.hexdigest()


class EffectClass(StrEnum):
    """What a step (or one effect) does to the world; decides what happens after a crash.

    ``none``/``read_only``/``idempotent`` effects are simply run again; a ``non_idempotent``
    effect caught in flight by a crash becomes ``ambiguous`` and its run ``needs_review``.
    """

    NONE = "none"
    READ_ONLY = "read_only"
    IDEMPOTENT = "idempotent"
    NON_IDEMPOTENT = "non_idempotent"


@dataclass(frozen=True)
class RetryPolicy:
    """How often a failing step is tried again, and how long to wait in between.

    ``max_attempts`` counts the first try. Waiting never holds the run's claim: the run is
    requeued with a ``not before`` time and any worker may pick it up.
    """

    max_attempts: int = 1
    backoff_s: float = 0.5
    multiplier: float = 2.0
    max_backoff_s: float = 30.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1)."""
        return float(min(self.max_backoff_s, self.backoff_s * self.multiplier ** max(0, attempt - 1)))

    def public(self) -> dict[str, Any]:
        return {
            "max_attempts": self.max_attempts,
            "backoff_s": self.backoff_s,
            "multiplier": self.multiplier,
            "max_backoff_s": self.max_backoff_s,
        }


@dataclass(frozen=True)
class StepSpec:
    """What ``@step``/``@router`` recorded about a method (read by the plan compiler)."""

    kind: Literal["step", "router"]
    entry: bool = False
    successors: tuple[str, ...] = ()
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    effects: EffectClass = EffectClass.NON_IDEMPOTENT
    idempotency_key: str | None = None
    timeout_s: float | None = None
    checkpoint: bool = True


def _retry_policy(retry: int | RetryPolicy | None) -> RetryPolicy:
    if retry is None:
        return RetryPolicy()
    if isinstance(retry, RetryPolicy):
        if retry.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be at least 1 (it counts the first try)")
        return retry
    if isinstance(retry, bool) or not isinstance(retry, int) or retry < 0:
        raise ValueError(f"retry must be a number of retries (0 or more) or a RetryPolicy, got {retry!r}")
    return RetryPolicy(max_attempts=retry + 1)


def _names(successors: Sequence[str]) -> tuple[str, ...]:
    """Successor names as a tuple (a single name may be given as a plain string)."""
    return (successors,) if isinstance(successors, str) else tuple(successors)


def _mark(fn: F | None, spec: StepSpec) -> Any:
    """Record ``spec`` on ``fn`` (bare decorator use), or return the decorator that will."""

    def mark(f: F) -> F:
        setattr(f, STEP_ATTR, spec)
        return f

    return mark(fn) if fn is not None else mark


@overload
def step(fn: F) -> F: ...
@overload
def step(
    fn: None = None,
    *,
    entry: bool = False,
    successors: Sequence[str] = (),
    retry: int | RetryPolicy | None = None,
    effects: EffectClass | str = EffectClass.NON_IDEMPOTENT,
    idempotency_key: str | None = None,
    timeout_s: float | None = None,
    checkpoint: bool = True,
) -> Callable[[F], F]: ...
def step(
    fn: F | None = None,
    *,
    entry: bool = False,
    successors: Sequence[str] = (),
    retry: int | RetryPolicy | None = None,
    effects: EffectClass | str = EffectClass.NON_IDEMPOTENT,
    idempotency_key: str | None = None,
    timeout_s: float | None = None,
    checkpoint: bool = True,
) -> Any:
    """Mark a method ``(self, state: dict, ctx) -> dict`` as a durable step.

    ``successors``: none ends the run, one is where the run goes next (use ``@router`` to choose
    among several). ``retry``: retries after the first try (an int) or a ``RetryPolicy``.
    ``idempotency_key``: a template (``{run_id}``, ``{step}``, ``{visit}``) given to the step as
    ``ctx.idempotency_key``; required for a non-idempotent step that retries. ``timeout_s``: the
    step is stopped (preemptively for sync steps) and counts as failed. ``checkpoint=False``
    skips the checkpoint row after this step (state is still committed).
    """
    spec = StepSpec(
        kind="step",
        entry=entry,
        successors=_names(successors),
        retry=_retry_policy(retry),
        effects=EffectClass(effects),
        idempotency_key=idempotency_key,
        timeout_s=timeout_s,
        checkpoint=checkpoint,
    )
    return _mark(fn, spec)


@overload
def router(fn: F, *, successors: Sequence[str], entry: bool = False) -> F: ...
@overload
def router(
    fn: None = None,
    *,
    successors: Sequence[str],
    entry: bool = False,
    retry: int | RetryPolicy | None = None,
    timeout_s: float | None = None,
) -> Callable[[F], F]: ...
def router(
    fn: F | None = None,
    *,
    successors: Sequence[str],
    entry: bool = False,
    retry: int | RetryPolicy | None = None,
    timeout_s: float | None = None,
) -> Any:
    """Mark a method ``(self, state: dict, ctx) -> str`` that returns the name of the next step."""
    spec = StepSpec(
        kind="router",
        entry=entry,
        successors=_names(successors),
        retry=_retry_policy(retry),
        effects=EffectClass.READ_ONLY,
        timeout_s=timeout_s,
        checkpoint=False,
    )
    return _mark(fn, spec)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


class Workflow:
    """Base class of durable workflows. The docstring is the description shown to users.

    Class attributes: ``name`` (default: snake_case of the class name), ``input_schema`` (JSON
    schema of a run's ``input``, optional). Define steps with ``@step``/``@router``, or one
    ``async def forward(self, session, ctx) -> Session | SessionInfo``; ``result(state)`` says what a
    finished run produced.

    One instance serves every run of the workflow (concurrently): keep per-run data in the
    state dict, never on ``self``. A step receives a fresh copy of the committed state and
    returns the new state; it may run again (retry, resume, crash), so side effects belong in
    ``ctx.effect``.

    Concurrency: ``concurrency = N`` lets at most N runs of the workflow execute at once across
    every worker and process of the store; the others stay queued and start first in, first out.
    ``concurrency_key`` makes the limit per key: the name of an input field (``"user"``: N runs
    per user at a time), or a method ``concurrency_key(self, input) -> str | None`` that computes
    it; with a key and no ``concurrency``, the limit is 1 per key. Runs without a key (None) share
    one group. Only running runs hold a slot: a run waiting on an interrupt (a human may take
    days) or for a retry's backoff does not, and queues again for a slot when it resumes.
    """

    name: str = ""
    input_schema: dict[str, Any] | None = None
    concurrency: int | None = None
    concurrency_key: str | Callable[[dict[str, Any]], str | None] | None = None
    notify_url: str | None = None
    """Where each run's summary is POSTed, signed, when it waits on a human or ends (a run start may
    name another URL); see docs/webhooks.md."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = _snake(cls.__name__)

    def result(self, state: dict[str, Any]) -> Any:
        """What a run produced, shown as ``result`` in its summary: called once, with the final state,
        when the run succeeds (it may be ``async``). Return JSON. The default is the final state itself;
        override it to hand back what a person needs (an answer, an outcome and who decided it)."""
        return state

    @classmethod
    def description(cls) -> str:
        """The class's own docstring, dedented (empty when it has none; never the base class's)."""
        doc = cls.__dict__.get("__doc__")
        return inspect.cleandoc(doc) if isinstance(doc, str) else ""


class StepContext(ABC):
    """What a running async step can see and do. Made by the durable layer, one per step execution.

    ``attempt`` counts tries of this step visit from 1; ``visit`` numbers step executions within
    the run (stable across retries and resumes, so effect and interrupt records line up).
    """

    run_id: str
    step: str
    attempt: int
    visit: int
    runtime: Services
    session_id: str | None
    input: dict[str, Any]
    idempotency_key: str | None
    output_session_id: str | None
    """The run's output session so far (set by this step or an earlier one), else None. The questions a
    human answered are recorded in it: a step that writes the run's output goes on from it."""

    @overload
    async def effect(
        self, key: str, fn: Callable[[], Awaitable[T]], effect_class: EffectClass | str = EffectClass.NON_IDEMPOTENT
    ) -> T: ...
    @overload
    async def effect(
        self, key: str, fn: Callable[[], T], effect_class: EffectClass | str = EffectClass.NON_IDEMPOTENT
    ) -> T: ...
    @abstractmethod
    async def effect(
        self, key: str, fn: Callable[[], Any], effect_class: EffectClass | str = EffectClass.NON_IDEMPOTENT
    ) -> Any:
        """Run ``fn`` once through the effect ledger: a completed effect is replayed, never repeated.

        ``key`` names the effect within this step visit. The result must be JSON-serialisable.
        """

    @abstractmethod
    async def interrupt(
        self,
        kind: InterruptKind,
        prompt: str = "",
        schema: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Decision:
        """Park the run until a human decides; returns the decision when the step resumes.

        The step is re-run from its start on resume: effects before the interrupt are replayed
        from the ledger and each ``interrupt`` call in the step is a distinct interrupt.
        """

    @abstractmethod
    def set_output_session(self, session_id: str) -> None:
        """Make ``session_id`` the run's ``output_session_id`` (committed with the step)."""

    @abstractmethod
    async def progress(self, message: str) -> None:
        """Record a ``step.progress`` event (shown to watchers)."""

    async def text(self, piece: str) -> None:
        """Record a piece of a model's text as it is generated (a ``step.text`` event); default: dropped."""
        return None

    async def save_artifact(
        self, data: bytes | str | os.PathLike[str], *, name: str | None = None, mime_type: str | None = None
    ) -> dict[str, Any]:
        """Keep ``data`` (bytes, text, or the path of a local file) as an artifact of this run and its
        session; its metadata (``artifact_id``, ``uri``, ``name``, ``size``, ``sha256``, ``mime_type``…).

        Through the effect ledger (keyed by name and content): a step run again after a crash or an
        interrupt gets the artifact it saved before, not a second one."""
        if isinstance(data, os.PathLike):
            path = Path(data)
            name = name or path.name
            content: bytes | Path = path
            digest = await anyio.to_thread.run_sync(_file_sha256, path)
        else:
            content = data.encode("utf-8") if isinstance(data, str) else data
            digest = hashlib.sha256(content).hexdigest()
        if not name:
            raise InvalidInputError("save_artifact needs a name for bytes or text (name='report.md')")

        async def save() -> dict[str, Any]:
            kept = await self.runtime.artifacts.save(
                content, name=name, mime_type=mime_type, session_id=self.session_id, run_id=self.run_id
            )
            return kept.public()

        result: dict[str, Any] = await self.effect(f"artifact:{name}:{digest}", save, EffectClass.IDEMPOTENT)
        return result

    async def secret(self, name: str) -> str:
        """The value of secret ``name`` (config.json ``secrets``), read from its source now.

        Use it, never keep it: anything the step writes (its state, result, effects, events, chunks,
        log lines) reads ``secret://NAME`` where the value was (``runtime.secrets``)."""
        return self.runtime.secrets.resolve(name)


class SyncStepContext(ABC):
    """The context a *sync* step gets. Sync steps run in an isolated child process, so that a
    timeout or cancel can stop them preemptively; their effects go to the ledger over a pipe.
    Interrupts need an async step.
    """

    run_id: str
    step: str
    attempt: int
    visit: int
    session_id: str | None
    input: dict[str, Any]
    idempotency_key: str | None

    @abstractmethod
    def effect(self, key: str, fn: Callable[[], T], effect_class: EffectClass | str = EffectClass.NON_IDEMPOTENT) -> T:
        """Like ``StepContext.effect``, for a plain function."""

    @abstractmethod
    def set_output_session(self, session_id: str) -> None:
        """Make ``session_id`` the run's ``output_session_id``."""

    @abstractmethod
    def progress(self, message: str) -> None:
        """Record a ``step.progress`` event."""


__all__ = [
    "Decision",
    "DecisionAction",
    "EffectClass",
    "InterruptKind",
    "RetryPolicy",
    "StepContext",
    "StepSpec",
    "SyncStepContext",
    "Workflow",
    "router",
    "step",
]
