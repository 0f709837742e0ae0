"""Spans of durable runs: ``run WORKFLOW`` per drive, ``step NAME`` per step execution, ``effect KEY`` per effect.

A run outlives the request that started it, and often the process: its steps may be driven by another
worker process, after a restart, or days later once a person answers. So a run keeps the W3C trace
context of the span that started it (``runs.trace_context``: the request's SERVER span, or the step
that started it from inside another run), and every *drive* of it (one worker's claim, from claiming
the run until it finishes, parks or fails) is a span ``run WORKFLOW`` made a child of that context.
Its steps are children of the drive's span, and a step's effects, model calls and sandbox commands
children of the step's, as they are current while the step runs.

Children, not links: a parent span that has ended, even long ago and in another process, is a valid
parent in OTLP (only its ids are named) and every backend assembles a trace by its trace id, so each
drive lands in the starting request's trace; a link would put each drive in a trace of its own. A run
started with no span around it (tracing off then, a schedule, the CLI) gets the context of its first
traced drive stored with that drive's first commit, so its later drives join that trace.

With tracing off all of this costs an attribute check per step: no span objects, no context stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runtime.telemetry import Attributes, Span, Tracing

#: The inert span a step context holds when its step is not traced.
NO_SPAN = Span()


def context_now(tracing: Tracing) -> str | None:
    """The current span's W3C trace context as stored on a run (JSON), or None outside a recorded span."""
    carrier = tracing.headers()
    return json.dumps(carrier, sort_keys=True) if carrier else None


def carriers(trace_context: str | None) -> list[Mapping[str, object]]:
    """A stored trace context as the parent a span is made under (none: the current span, if any)."""
    if not trace_context:
        return []
    found = json.loads(trace_context)
    return [found] if isinstance(found, dict) else []


def run_span(tracing: Tracing, workflow: str, run_id: str, trace_context: str | None, lost_leases: int) -> Span:
    """The span of one drive of a run, a child of where the run was started."""
    if not tracing.enabled:
        return NO_SPAN
    attributes: dict[str, Any] = {"rath.run_id": run_id, "rath.workflow": workflow}
    span = tracing.span(f"run {workflow}", attributes=attributes, carriers=carriers(trace_context))
    if lost_leases:  # the worker that drove it last vanished: this drive took the run over
        span.event("lease.taken_over", {"rath.lost_leases": lost_leases})
    return span


def step_span(tracing: Tracing, run_id: str, step: str, attempt: int, visit: int) -> Span:
    if not tracing.enabled:
        return NO_SPAN
    attributes: Attributes = {"rath.run_id": run_id, "rath.step": step, "rath.attempt": attempt, "rath.visit": visit}
    return tracing.span(f"step {step}", attributes=attributes)


def effect_span(tracing: Tracing, key: str, effect_class: str) -> Span:
    """An effect's span; its key is the step's own name for it (code's, not a message's)."""
    if not tracing.enabled:
        return NO_SPAN
    return tracing.span(f"effect {key}", attributes={"rath.effect.key": key, "rath.effect.class": effect_class})
