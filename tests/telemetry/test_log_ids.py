"""A log line written while a span is current ends with that span's ``trace_id`` and ``span_id``."""

from __future__ import annotations

import io
import logging

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runtime.telemetry import Tracing
from runtime.telemetry.logs import correlate
from runtime.telemetry.otel import OtelTracing


def _logger(tracing: Tracing) -> tuple[logging.Logger, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    correlate(tracing, handler)
    logger = logging.getLogger(f"test.trace_ids.{id(out)}")
    logger.propagate = False
    logger.addHandler(handler)
    return logger, out


def test_a_line_in_a_span_names_it_and_one_outside_reads_as_before() -> None:
    exporter = InMemorySpanExporter()
    tracing = OtelTracing(exporter)
    logger, out = _logger(tracing)
    try:
        logger.warning("before")
        with tracing.span("tools/call session_fork"):
            ids = tracing.ids()
            logger.warning("inside")
        logger.warning("after")
    finally:
        tracing.shutdown()
    assert ids is not None
    assert out.getvalue().splitlines() == [
        f"WARNING {logger.name}: before",
        f"WARNING {logger.name}: inside trace_id={ids[0]} span_id={ids[1]}",
        f"WARNING {logger.name}: after",
    ]
    (span,) = exporter.get_finished_spans()
    assert format(span.context.span_id, "016x") == ids[1]


def test_without_tracing_the_handler_is_untouched() -> None:
    logger, out = _logger(Tracing())
    logger.warning("plain")
    assert out.getvalue() == f"WARNING {logger.name}: plain\n"
    assert not logger.handlers[0].filters
