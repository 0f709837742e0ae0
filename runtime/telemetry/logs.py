"""Log lines that name the span they were written in: ``trace_id=… span_id=…`` at the end of the line.

``correlate`` puts a filter on a handler that gives each record ``trace_ids`` (the words to append,
or "" outside a span) and wraps the handler's formatter so its lines end with them. With tracing
off nothing is installed; a line written outside any span reads exactly as before.
"""

from __future__ import annotations

import logging

from runtime.telemetry.base import Tracing


class TraceIds(logging.Filter):
    """Gives every record a ``trace_ids`` attribute: `` trace_id=… span_id=…`` inside a span, else ""."""

    def __init__(self, tracing: Tracing) -> None:
        super().__init__()
        self.tracing = tracing

    def filter(self, record: logging.LogRecord) -> bool:
        found = self.tracing.ids()
        record.trace_ids = f" trace_id={found[0]} span_id={found[1]}" if found else ""
        return True


class WithTraceIds(logging.Formatter):
    """A handler's own formatter, with the record's ``trace_ids`` after the message it writes."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        return self.inner.format(record) + str(getattr(record, "trace_ids", ""))


def correlate(tracing: Tracing, handler: logging.Handler) -> None:
    """Make ``handler``'s lines end with the current span's ids (when tracing is on)."""
    if not tracing.enabled:
        return
    handler.addFilter(TraceIds(tracing))
    handler.setFormatter(WithTraceIds(handler.formatter))
