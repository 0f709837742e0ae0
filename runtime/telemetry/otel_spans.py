"""Spans made whole when they end: the SDK's sampler and ids, without its ``Span``.

Every span of ours lives inside one ``with`` block of our own (``OtelTracing.span``): it starts there,
gets its attributes, events and status there and ends there, and nothing outside holds it. So it
needs none of what the SDK's mutable ``Span`` pays for on each one (a lock, attribute validation
into a ``BoundedAttributes`` as each is set, the ``ReadableSpan`` copy made at its end, the
processor fan-out): that was about half of what tracing cost a durable no-op step. Here a span is
a few slots while it runs; what is current meanwhile is a ``NonRecordingSpan`` of its ids, so its
children (effects, commands, model calls, outgoing ``traceparent`` headers, runs started in it)
name it as their parent; at its end it becomes one record of plain values (``span_export.py``)
appended to the outbox, which hands it to the export process, where it becomes the SDK's
``ReadableSpan`` for the SDK's batch processor and exporter.

What stays the SDK's: the ids (the provider's ``id_generator``), the sampling decision (the
provider's sampler, ``OTEL_TRACES_SAMPLER``, asked for every span through its public
``should_sample``, as the SDK's tracer does: a parent-based sampler follows the parent's flag, a
ratio decides by the trace id, ``always_off`` records nothing but still makes ids, so a child of an
unsampled span is unsampled too), the resource, and the span limits (``OTEL_SPAN_*``,
``OTEL_ATTRIBUTE_*``: applied where the record becomes a ``ReadableSpan``, by the SDK's
``BoundedAttributes``). Not kept: the SDK's ``on_start`` (a ``BatchSpanProcessor``'s does nothing)
and its own span-count metrics (made only with a meter provider, which ours never has).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from time import time_ns
from typing import Any

import opentelemetry.context as otel_context
import opentelemetry.trace as trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags, TraceState

from runtime.telemetry.base import Attributes, AttributeValue, Kind, Span
from runtime.telemetry.span_export import Outbox

_SAMPLED = TraceFlags.SAMPLED
_RANDOM = TraceFlags.RANDOM_TRACE_ID
_ERROR = StatusCode.ERROR.value
_TRACE_FLAGS = [TraceFlags(flags) for flags in range(4)]  # by (sampled | random): made once, not per span
_KINDS = {"internal": SpanKind.INTERNAL, "server": SpanKind.SERVER, "client": SpanKind.CLIENT}
_KIND_VALUES = {name: kind.value for name, kind in _KINDS.items()}  # by name: a str's hash is kept, an enum's is not
_PARENT_BASED = ("parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio")


def clean(attributes: Attributes) -> dict[str, Any]:
    """``attributes`` without its ``None`` values; lists become tuples (a caller's list may change after)."""
    given = dict(attributes)
    values = given.values()
    if None not in values and list not in map(type, values):  # most: a copy made in C, no loop of ours
        return given
    return {key: tuple(got) if isinstance(got, list) else got for key, got in given.items() if got is not None}


def follows_local_parent(sampler: Sampler, environ: Mapping[str, str]) -> bool:
    """Whether ``sampler``'s decision under a parent span of this process is that parent's sampled flag.

    True of the samplers ``OTEL_TRACES_SAMPLER`` names ``parentbased_*`` (the default is
    ``parentbased_always_on``): the SDK builds them as its ``ParentBased`` with the default delegates for
    a local parent (``ALWAYS_ON`` when it is sampled, ``ALWAYS_OFF`` when not, the parent's trace state
    kept). Any other sampler (``traceidratio``, ``always_on``, ``always_off``, or a ``ParentBased`` made
    otherwise) is asked for every span.
    """
    named = environ.get("OTEL_TRACES_SAMPLER", "parentbased_always_on").strip().lower()
    return isinstance(sampler, ParentBased) and named in _PARENT_BASED


class Recorder:
    """What every span is made with: the provider's sampler and id generator, and the outbox its record goes
    to when it ends."""

    def __init__(self, provider: TracerProvider, outbox: Outbox) -> None:
        self.sampler = provider.sampler
        self.ids = provider.id_generator
        self.put = outbox.put
        self._random_roots = self.ids.is_trace_id_random()
        self._follows_local_parent = follows_local_parent(self.sampler, os.environ)

    def start(
        self,
        name: str,
        kind: Kind,
        attributes: Attributes | None,
        parent: otel_context.Context | None,
        capture: bool,
    ) -> Span:
        """A span starting now, a child of ``parent`` (a context; ``None``: the current one)."""
        parent_ids: SpanContext | None = trace.get_current_span(parent).get_span_context()
        if parent_ids is not None and parent_ids.is_valid:
            parent_flags: int = parent_ids.trace_flags
            trace_id, random = parent_ids.trace_id, parent_flags & _RANDOM
        else:
            parent_ids, parent_flags, trace_id, random = None, 0, self.ids.generate_trace_id(), self._random_roots
        if parent_ids is not None and self._follows_local_parent and not parent_ids.is_remote:
            # what the sampler would decide (follows_local_parent), without asking it: most spans are these;
            # the attributes are copied only for a span that keeps them
            recorded = sampled = parent_flags & _SAMPLED
            trace_state: TraceState | None = parent_ids.trace_state
            given = clean(attributes) if attributes and sampled else {}
        else:
            given = clean(attributes) if attributes else {}
            decided = self.sampler.should_sample(parent, trace_id, name, _KINDS[kind], given)
            sampled, trace_state = decided.decision is Decision.RECORD_AND_SAMPLE, decided.trace_state
            recorded = decided.decision is not Decision.DROP  # (recorded but unsampled: the processor drops it)
            # the sampler's attributes are the span's (the SDK's tracer starts a span with them): ours, or more
            given = dict(decided.attributes)
        flags = (_SAMPLED if sampled else 0) | (_RANDOM if random else 0)
        span_id = self.ids.generate_span_id()
        ids = SpanContext(trace_id, span_id, False, _TRACE_FLAGS[flags], trace_state)
        if not recorded:
            return UnrecordedSpan(ids)
        # the record's fields known now (read here from locals, not from the span context's properties at the end)
        parents = None if parent_ids is None else (parent_ids.span_id, parent_ids.is_remote, int(parent_flags))
        state = tuple(trace_state.items()) if trace_state else None
        return OtelSpan(self, (name, _KIND_VALUES[kind], trace_id, span_id, flags, state, parents), ids, given, capture)

    def end(self, span: OtelSpan, end_time: int) -> None:
        self.put((*span.head, span.attributes, span.events, span.status, span.start_time, end_time))


class _Current(Span):
    """A span whose ids are the current context's while its ``with`` block runs."""

    __slots__ = ("_token", "ids")

    def __init__(self, ids: SpanContext) -> None:
        self.ids = ids
        self._token: object = None

    def __enter__(self) -> _Current:
        self._token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(self.ids)))
        return self

    def __exit__(self, *exc_info: object) -> None:
        otel_context.detach(self._token)  # type: ignore[arg-type]


class UnrecordedSpan(_Current):
    """A span the sampler dropped: its ids are current (its children know they are unsampled too), nothing
    set on it goes anywhere."""

    __slots__ = ()


class OtelSpan(_Current):
    """A span being recorded: entering makes it current, leaving ends it (an exception marks it failed)."""

    __slots__ = ("_capture", "_failed", "_recorder", "attributes", "events", "head", "start_time", "status")
    recording = True

    def __init__(
        self, recorder: Recorder, head: tuple[Any, ...], ids: SpanContext, attributes: dict[str, Any], capture: bool
    ) -> None:
        # (no super().__init__ call, and no list for events until one comes: a span per step adds up)
        self.ids, self._token = ids, None
        self._recorder, self.head, self.attributes = recorder, head, attributes  # head: the record's first fields
        self.events: list[tuple[str, dict[str, Any] | None, int]] | tuple[()] = ()
        self.status: tuple[int, str | None] | None = None  # unset
        self._capture, self._failed = capture, False
        self.start_time = time_ns()

    def __exit__(self, *exc_info: object) -> None:
        error = exc_info[1] if exc_info else None
        try:
            if isinstance(error, Exception) and not self._failed:  # a cancellation is no failure of the span's work
                self.fail(type(error).__qualname__, str(error))
        finally:
            otel_context.detach(self._token)  # type: ignore[arg-type]
            self._recorder.end(self, time_ns())

    def set(self, key: str, value: AttributeValue | None) -> None:
        if value is not None:
            self.attributes[key] = tuple(value) if isinstance(value, list) else value

    def set_many(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        self.attributes.update(clean(attributes))

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        self.events = [*self.events, (name, clean(attributes) if attributes else None, time_ns())]

    def fail(self, error_type: str, description: str | None = None) -> None:
        self._failed = True
        self.attributes["error.type"] = error_type
        self.status = (_ERROR, description if self._capture else None)
