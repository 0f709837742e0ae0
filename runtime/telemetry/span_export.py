"""Ended spans on their way out: plain records, the traced process's outbox, and the SDK's export pipeline.

A span of ours (``otel_spans.py``) ends as one *record*: a tuple of plain values (str, int, bool,
tuple, dict, None) that ``marshal`` writes and reads without any class of ours or the SDK's:

    (name, kind, trace_id, span_id, flags, trace_state, parent, attributes, events, status, start, end)

``kind`` is the ``SpanKind``'s number, ``flags`` the span's W3C trace flags, ``trace_state`` its
W3C trace state as ``(key, value)`` pairs (``None`` when empty), ``parent`` the parent's
``(span_id, is_remote, flags)`` (``None`` for a root), ``events`` ``(name, attributes or None,
time_ns)`` each, ``status`` ``(code, description)`` (``None``: unset), times in ns since the epoch.

The traced process only appends records to an :class:`Outbox` (a bounded queue, as the SDK's batch
processor's is) whose thread hands them over in batches. :class:`Exporting` is what receives them:
the SDK's ``ReadableSpan`` made of each, the span limits applied (``OTEL_SPAN_*``,
``OTEL_ATTRIBUTE_*``), handed to the SDK's ``BatchSpanProcessor`` (``OTEL_BSP_*``) and its exporter.
It runs in the export process (``export_process.py``), so the traced process never holds its
interpreter lock to encode or send; or in the traced process itself when a caller hands
``OtelTracing`` an exporter object (the tests' in-memory one), the same pipeline without the pipe.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.environment_variables import OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_SCHEDULE_DELAY
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

log = logging.getLogger(__name__)

Record = tuple[Any, ...]
#: The longest the outbox gathers records before handing a batch over (shorter when OTEL_BSP_SCHEDULE_DELAY is).
GATHER_S = 0.05
#: The most records in one hand-over (the SDK's default export batch).
BATCH = 512
_KINDS = {kind.value: kind for kind in SpanKind}
_STATUS_CODES = {code.value: code for code in StatusCode}
_UNSET = Status(StatusCode.UNSET)
_NO_STATE = TraceState()


def _setting(environ: Mapping[str, str], name: str, default: int) -> int:
    """A positive whole ``OTEL_BSP_*`` setting; the SDK's default when unset or not one (as the SDK does)."""
    try:
        value = int(environ.get(name, "").strip() or default)
    except ValueError:
        return default
    return value if value > 0 else default


class Outbox:
    """Ended spans' records, queued by the traced code (never blocking it) and handed to ``deliver`` in batches
    by a thread of its own; past ``OTEL_BSP_MAX_QUEUE_SIZE`` waiting, the oldest are dropped."""

    def __init__(self, deliver: Callable[[list[Record]], None], environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self._deliver = deliver
        self._most = _setting(environ, OTEL_BSP_MAX_QUEUE_SIZE, 2048)
        self._gather_s = min(GATHER_S, _setting(environ, OTEL_BSP_SCHEDULE_DELAY, 5000) / 1000)
        self._queue: deque[Record] = deque(maxlen=self._most)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self.dropped = 0
        self._thread = threading.Thread(target=self._ship, name="rath-otel-outbox", daemon=True)
        self._thread.start()

    def put(self, record: Record) -> None:
        """Queue one ended span (a few appends: this is on the traced code's path)."""
        queue = self._queue
        if len(queue) == self._most:
            self.dropped += 1
        queue.append(record)
        if len(queue) == 1:  # the first since the last hand-over: wake the thread (it gathers more first)
            self._wake.set()

    def stop(self, wait_s: float) -> bool:
        """Hand over what is queued and stop; whether that was done within ``wait_s`` (a ``deliver`` may block)."""
        self._stopping.set()
        self._wake.set()
        self._thread.join(wait_s)
        return not self._thread.is_alive()

    def _ship(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if not self._stopping.is_set():
                self._stopping.wait(self._gather_s)  # let a batch gather; a stop cuts it short
            self._hand_over()
            if self._stopping.is_set():
                self._hand_over()  # what came in while the last batch was handed over
                return

    def _hand_over(self) -> None:
        queue = self._queue
        while queue:
            batch = [queue.popleft() for _ in range(min(len(queue), BATCH))]
            try:
                self._deliver(batch)
            except Exception:  # never let the thread die: later spans still go out
                log.exception("%d spans not handed over for export", len(batch))
        if self.dropped:
            log.warning("%d spans dropped: more than %d were waiting for export", self.dropped, self._most)
            self.dropped = 0


class Exporting:
    """The SDK's ``BatchSpanProcessor`` and ``exporter``, fed records: each becomes the ``ReadableSpan`` the
    SDK's exporters take, with this process's resource and scope and the span limits applied."""

    def __init__(self, exporter: SpanExporter, resource: Resource, scope: InstrumentationScope) -> None:
        self.resource, self.scope = resource, scope
        self.processor = BatchSpanProcessor(exporter)  # OTEL_BSP_* read by the processor
        self.limits = limits = SpanLimits()  # the OTEL_SPAN_* / OTEL_ATTRIBUTE_* variables, as the SDK reads them
        self._cut_values = limits.max_span_attribute_length is not None
        self._most_attributes = math.inf if limits.max_span_attributes is None else limits.max_span_attributes
        self._most_events = math.inf if limits.max_events is None else limits.max_events
        self._flags: dict[int, TraceFlags] = {}

    def take(self, records: Sequence[Record]) -> None:
        """Queue ``records`` for export (never blocks: the processor's queue drops what does not fit)."""
        for record in records:
            self.processor.on_end(self.readable(record))

    def shutdown(self, wait_s: float) -> None:
        """Export what is queued and stop, waiting at most ``wait_s``: the SDK's own wait is bounded only by the
        exporter's timeout per batch, and a hung collector must not hold a stop (the helper thread is left
        to it)."""
        stopping = threading.Thread(target=self.processor.shutdown, name="rath-otel-shutdown", daemon=True)
        stopping.start()
        stopping.join(wait_s)

    def readable(self, record: Record) -> ReadableSpan:
        name, kind, trace_id, span_id, flags, state, parent, attributes, events, status, start, end = record
        trace_state = TraceState(state) if state else _NO_STATE
        context = SpanContext(trace_id, span_id, False, self._trace_flags(flags), trace_state)
        parent_context = None
        if parent is not None:
            parent_span, remote, parent_flags = parent
            parent_context = SpanContext(trace_id, parent_span, remote, self._trace_flags(parent_flags), trace_state)
        if self._cut_values or len(attributes) > self._most_attributes:
            limits = self.limits
            attributes = BoundedAttributes(
                limits.max_span_attributes, attributes, immutable=True, max_value_len=limits.max_span_attribute_length
            )
        made: Sequence[Event] = [self._event(*event) for event in events] if events else ()
        if len(made) > self._most_events:
            made = BoundedList.from_seq(self.limits.max_events, made)
        return ReadableSpan(
            name=name,
            context=context,
            parent=parent_context,
            resource=self.resource,
            attributes=attributes,
            events=made,
            kind=_KINDS[kind],
            status=Status(_STATUS_CODES[status[0]], status[1]) if status else _UNSET,
            start_time=start,
            end_time=end,
            instrumentation_scope=self.scope,
        )

    def _event(self, name: str, attributes: Mapping[str, Any] | None, at: int) -> Event:
        limits = self.limits
        bounded = BoundedAttributes(
            limits.max_event_attributes, attributes or {}, immutable=True, max_value_len=limits.max_attribute_length
        )
        return Event(name, bounded, at)

    def _trace_flags(self, flags: int) -> TraceFlags:
        found = self._flags.get(flags)
        if found is None:
            found = self._flags[flags] = TraceFlags(flags)
        return found
