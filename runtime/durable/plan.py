"""Compile a ``Workflow`` class into an immutable plan with a definition hash.

Compiling checks the graph once, up front, so that a bad definition fails when it is
registered rather than halfway through a run: there must be exactly one entry, successors
must name steps, every step must be reachable from the entry, a plain step may have at most
one successor (a ``@router`` chooses among several), and a non-idempotent step that retries
must say how to keep its retries safe (an ``idempotency_key``). The hash covers the graph and
the source of each step, so a changed definition gets a new ``plan_hash``.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any, Literal

from runtime.errors import InvalidInputError
from runtime.flow.workflow import STEP_ATTR, EffectClass, RetryPolicy, StepSpec, Workflow

FORWARD_STEP = "forward"


@dataclass(frozen=True)
class StepPlan:
    """One node of a compiled plan."""

    name: str
    kind: Literal["step", "router", "forward"]
    entry: bool
    successors: tuple[str, ...]
    effects: EffectClass
    retry: RetryPolicy
    idempotency_key: str | None
    timeout_s: float | None
    checkpoint: bool
    is_async: bool

    def public(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": "step" if self.kind == "forward" else self.kind,
            "entry": self.entry,
            "successors": list(self.successors),
            "effects": self.effects.value,
            "retry": self.retry.public(),
            "timeout_s": self.timeout_s,
        }


@dataclass(frozen=True)
class Plan:
    """A compiled workflow: immutable, hashed, bound to one instance of the workflow class."""

    name: str
    description: str
    input_schema: Mapping[str, Any] | None
    entry: str
    steps: Mapping[str, StepPlan]
    workflow: Workflow
    concurrency: int | None = None
    """At most this many runs execute at once across the store (per concurrency key); None: no limit."""
    concurrency_key: str | None = None
    """The input field that keys the limit, or the name of the method that computes it (described only)."""
    key_of: Callable[[dict[str, Any]], str | None] | None = None
    notify_url: str | None = None
    """Where a run is notified when it waits on a human or ends, unless its start names another URL."""

    @cached_property
    def plan_hash(self) -> str:
        """What identifies this definition: its steps and their source code (a run resumed under another
        hash records ``run.plan_changed``). Computed on first use: reading the sources of the shipped
        workflows cost ~4 ms of every server start, before any run needed it."""
        cls = type(self.workflow)
        found = _collect(cls)
        if found:
            sources = {name: _source(fn) for name, (_, fn) in found.items()}
        else:
            sources = {FORWARD_STEP: _source(cls.forward)}  # type: ignore[attr-defined]
        canonical = {
            "name": self.name,
            "entry": self.entry,
            "steps": {
                n: {**s.public(), "idempotency_key": s.idempotency_key, "checkpoint": s.checkpoint}
                for n, s in self.steps.items()
            },
            "sources": sources,
        }
        return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()[:32]

    def method(self, step: str) -> Callable[..., Any]:
        return getattr(self.workflow, step)  # type: ignore[no-any-return]

    def run_key(self, input: dict[str, Any]) -> str | None:
        """The concurrency key of a run with this input (None: the workflow's keyless group)."""
        if self.key_of is None:
            return None
        try:
            key = self.key_of(input)
        except Exception as exc:  # the workflow's own code: its failure is a bad input, said in one line
            raise InvalidInputError(
                f"concurrency_key of workflow {self.name!r} failed on this input ({type(exc).__name__}: {exc}); "
                "give the input it expects"
            ) from None
        if key is not None and not isinstance(key, str):
            raise InvalidInputError(
                f"concurrency_key of workflow {self.name!r} gave {key!r} for this input; "
                "it must return a string or None"
            )
        return key

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema) if self.input_schema is not None else None,
            "steps": [s.public() for s in self.steps.values()],
            "plan_hash": self.plan_hash,
            "concurrency": self.concurrency,
            "concurrency_key": self.concurrency_key,
        }


def _fail(cls: type, message: str) -> InvalidInputError:
    return InvalidInputError(f"workflow {cls.__name__} ({getattr(cls, 'name', '?')!r}) is not valid: {message}")


def _collect(cls: type[Workflow]) -> dict[str, tuple[StepSpec, Callable[..., Any]]]:
    found: dict[str, tuple[StepSpec, Callable[..., Any]]] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            spec = getattr(value, STEP_ATTR, None)
            if isinstance(spec, StepSpec):
                found[attr] = (spec, value)
            elif attr in found:  # overridden by a plain attribute
                del found[attr]
    return found


def _source(fn: Callable[..., Any]) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return getattr(fn, "__qualname__", repr(fn))


def _step_plan(cls: type, name: str, spec: StepSpec, fn: Callable[..., Any]) -> StepPlan:
    if spec.kind == "router" and not spec.successors:
        raise _fail(
            cls, f"router {name!r} has no successors; list the steps it may choose with @router(successors=[...])"
        )
    if spec.kind == "step" and len(spec.successors) > 1:
        raise _fail(
            cls,
            f"step {name!r} has several successors {list(spec.successors)}; a plain step goes to at most one: "
            "add a @router that returns the next step's name",
        )
    if spec.timeout_s is not None and spec.timeout_s <= 0:
        raise _fail(cls, f"step {name!r} has timeout_s={spec.timeout_s}; give a positive number of seconds or None")
    if spec.effects is EffectClass.NON_IDEMPOTENT and spec.retry.max_attempts > 1 and not spec.idempotency_key:
        raise _fail(
            cls,
            f"step {name!r} is non-idempotent and retries ({spec.retry.max_attempts} attempts) but has no "
            "idempotency_key; add idempotency_key='...{run_id}...' (given to the step as ctx.idempotency_key), "
            "declare a weaker effects= class, or drop the retries",
        )
    if spec.idempotency_key is not None:
        try:
            spec.idempotency_key.format(run_id="run", step=name, visit=1)
        except (KeyError, IndexError, ValueError) as exc:
            raise _fail(
                cls,
                f"idempotency_key {spec.idempotency_key!r} of step {name!r} is not a valid template ({exc!r}); "
                "it may use {run_id}, {step} and {visit}",
            ) from None
    return StepPlan(
        name=name,
        kind=spec.kind,
        entry=spec.entry,
        successors=spec.successors,
        effects=spec.effects,
        retry=spec.retry,
        idempotency_key=spec.idempotency_key,
        timeout_s=spec.timeout_s,
        checkpoint=spec.checkpoint,
        is_async=inspect.iscoroutinefunction(fn),
    )


def _check_graph(cls: type, steps: dict[str, StepPlan]) -> str:
    entries = [s.name for s in steps.values() if s.entry]
    if not entries:
        raise _fail(cls, f"no entry step among {sorted(steps)}; mark the first one with @step(entry=True)")
    if len(entries) > 1:
        raise _fail(cls, f"several entry steps {entries}; mark exactly one with entry=True")
    for s in steps.values():
        for succ in s.successors:
            if succ not in steps:
                raise _fail(cls, f"step {s.name!r} names unknown successor {succ!r}; known steps: {sorted(steps)}")
    seen, todo = {entries[0]}, [entries[0]]
    while todo:
        for succ in steps[todo.pop()].successors:
            if succ not in seen:
                seen.add(succ)
                todo.append(succ)
    unreachable = sorted(set(steps) - seen)
    if unreachable:
        raise _fail(cls, f"steps {unreachable} cannot be reached from entry {entries[0]!r}; list them as successors")
    return entries[0]


def _forward_plan(cls: type[Workflow]) -> dict[str, StepPlan]:
    fn = getattr(cls, "forward", None)
    if fn is None or not callable(fn):
        raise _fail(
            cls, "it has no steps; decorate methods with @step/@router or define async def forward(self, session, ctx)"
        )
    if not inspect.iscoroutinefunction(fn):
        raise _fail(cls, "forward must be an async def forward(self, session, ctx)")
    plan = StepPlan(
        name=FORWARD_STEP,
        kind="forward",
        entry=True,
        successors=(),
        effects=EffectClass.NON_IDEMPOTENT,
        retry=RetryPolicy(),
        idempotency_key=None,
        timeout_s=None,
        checkpoint=True,
        is_async=True,
    )
    return {FORWARD_STEP: plan}


def _field_key(field: str) -> Callable[[dict[str, Any]], str | None]:
    def key_of(input: dict[str, Any]) -> str | None:
        value = input.get(field)
        return value if value is None or isinstance(value, str) else json.dumps(value, sort_keys=True)

    return key_of


def _concurrency(cls: type[Workflow], instance: Workflow) -> dict[str, Any]:
    """The plan's concurrency fields from the class's ``concurrency`` and ``concurrency_key``."""
    limit, key = cls.concurrency, cls.concurrency_key
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise _fail(cls, f"concurrency = {limit!r}; give a whole number of runs, 1 or more (or None: no limit)")
    if key is None:
        return {"concurrency": limit}
    if isinstance(key, str):
        if not key:
            raise _fail(cls, "concurrency_key is empty; name an input field, or define a method concurrency_key(input)")
        return {"concurrency": limit or 1, "concurrency_key": key, "key_of": _field_key(key)}
    if callable(key):
        return {"concurrency": limit or 1, "concurrency_key": "concurrency_key()", "key_of": instance.concurrency_key}
    raise _fail(cls, f"concurrency_key = {key!r}; name an input field, or define a method concurrency_key(input)")


def compile_workflow(target: type[Workflow] | Workflow) -> Plan:
    """Check a workflow class (or instance) and return its immutable plan."""
    instance = target() if isinstance(target, type) else target
    cls = type(instance)
    if not isinstance(instance, Workflow):
        raise InvalidInputError(f"{cls.__name__} is not a Workflow subclass; derive it from runtime.Workflow")
    found = _collect(cls)
    if found:
        steps = {name: _step_plan(cls, name, spec, fn) for name, (spec, fn) in found.items()}
        entry = _check_graph(cls, steps)
    else:
        steps = _forward_plan(cls)
        entry = FORWARD_STEP
    if not cls.name or not cls.name.replace("_", "").replace("-", "").isalnum():
        raise _fail(cls, f"name {cls.name!r} must be letters, digits, '_' or '-'")
    return Plan(
        name=cls.name,
        description=cls.description(),
        input_schema=MappingProxyType(dict(cls.input_schema)) if cls.input_schema is not None else None,
        entry=entry,
        steps=MappingProxyType(steps),
        workflow=instance,
        **_concurrency(cls, instance),
        notify_url=_notify_url(cls),
    )


def _notify_url(cls: type[Workflow]) -> str | None:
    """The class's ``notify_url`` (checked against the server's webhook policy when a run starts)."""
    url = getattr(cls, "notify_url", None)
    if url is not None and (not isinstance(url, str) or not url.startswith(("https://", "http://"))):
        raise _fail(cls, f"notify_url = {url!r}; give an https:// URL (or None: no notifications)")
    return url
