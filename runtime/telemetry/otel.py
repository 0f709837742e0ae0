"""Tracing switched on: OpenTelemetry's SDK exporting OTLP over HTTP/protobuf (the ``otel`` extra).

Everything is configured by the standard ``OTEL_*`` variables, read by the SDK itself: the endpoint
(``OTEL_EXPORTER_OTLP_ENDPOINT`` gets ``/v1/traces`` appended, ``…_TRACES_ENDPOINT`` is used as
given), headers, timeout and compression, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_SERVICE_NAME`` (here
``rath-mcp`` unless set), the sampler (``OTEL_TRACES_SAMPLER``) and the batch settings
(``OTEL_BSP_*``). Ending a span only appends its record to a bounded queue (``span_export.Outbox``,
dropping spans past ``OTEL_BSP_MAX_QUEUE_SIZE``); a thread writes them in batches to the export
process (``export_process.py``), where the SDK's ``BatchSpanProcessor`` and the OTLP exporter run, off
this process's interpreter lock. A collector that is down or slow costs requests nothing. Given an
exporter object instead (the tests' in-memory one), the same pipeline runs in this process.

No global is set (OpenTelemetry's global tracer provider stays untouched): the one ``OtelTracing``
of a process is made by the CLI and passed to what emits spans. The current span does live in
OpenTelemetry's context (a ``contextvars`` variable), so spans nest across ``await`` as code does.
"""

from __future__ import annotations

import atexit
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from runtime.extras import require_extra
from runtime.telemetry.base import CAPTURE_VARIABLE, Attributes, Kind, Span, Tracing

require_extra("opentelemetry.sdk.trace", "otel")
require_extra("opentelemetry.exporter.otlp.proto.http", "otel")  # (the exporter is imported by the export process)
require_extra("opentelemetry.proto.trace.v1.trace_pb2", "otel")

import opentelemetry.context as otel_context  # noqa: E402  (after the check naming the extra)
import opentelemetry.trace as trace  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExporter  # noqa: E402
from opentelemetry.sdk.util.instrumentation import InstrumentationScope  # noqa: E402
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator  # noqa: E402

from runtime.telemetry.export_process import SHUTDOWN_WAIT_S, ExportProcess  # noqa: E402
from runtime.telemetry.otel_spans import Recorder  # noqa: E402
from runtime.telemetry.span_export import Exporting, Outbox  # noqa: E402

DEFAULT_SERVICE_NAME = "rath-mcp"
_CONTEXT_KEYS = ("traceparent", "tracestate")


class OtelTracing(Tracing):
    """Spans made with the sampler and ids of an SDK ``TracerProvider`` (``otel_spans.py``), exported in batches
    by the export process, or in this process by ``exporter`` when one is given."""

    enabled = True

    def __init__(
        self,
        exporter: SpanExporter | None,
        *,
        capture_content: bool = False,
        resource: Resource | None = None,
        environ: Mapping[str, str] | None = None,
    ):
        super().__init__()
        self.capture_content = capture_content
        # the provider reads the sampler (OTEL_TRACES_SAMPLER) and id generator; it processes no span itself
        provider = TracerProvider(resource=resource or _resource({}), shutdown_on_exit=False)
        scope = InstrumentationScope("rath-mcp", _version())
        self._exporting: Exporting | None = None
        self._process: ExportProcess | None = None
        if exporter is None:
            self._process = ExportProcess(provider.resource, scope, os.environ if environ is None else environ)
            self._outbox = Outbox(self._process.send, environ)
        else:
            self._exporting = Exporting(exporter, provider.resource, scope)
            self._outbox = Outbox(self._exporting.take, environ)
        self._recorder = Recorder(provider, self._outbox)
        self._propagator = TraceContextTextMapPropagator()
        self._stopped = False
        atexit.register(self.shutdown)  # the last spans go out at exit also without a stop (as the SDK's provider does)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> OtelTracing:
        """Tracing to the OTLP/HTTP exporter the ``OTEL_*`` variables describe, run by an export process."""
        capture = environ.get(CAPTURE_VARIABLE, "").strip().lower() == "true"
        return cls(None, capture_content=capture, resource=_resource(environ), environ=environ)

    @property
    def export_pid(self) -> int | None:
        """The export process's id (``None`` when spans go to an exporter in this process)."""
        return self._process.pid if self._process else None

    def span(
        self,
        name: str,
        *,
        kind: Kind = "internal",
        attributes: Attributes | None = None,
        carriers: Sequence[Mapping[str, object]] = (),
    ) -> Span:
        parent = self._parent(carriers) if carriers else None
        return self._recorder.start(name, kind, attributes, parent, self.capture_content)

    def _parent(self, carriers: Sequence[Mapping[str, object]]) -> otel_context.Context | None:
        """The first carrier's valid W3C trace context, else ``None`` (the current span is the parent)."""
        for carrier in carriers:
            found = {key: value for key in _CONTEXT_KEYS if isinstance(value := carrier.get(key), str)}
            if "traceparent" not in found:
                continue
            extracted = self._propagator.extract(found)
            if trace.get_current_span(extracted).get_span_context().is_valid:
                return extracted
        return None

    def headers(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        return carrier

    def trace_id(self) -> str | None:
        found = self.ids()
        return found[0] if found else None

    def ids(self) -> tuple[str, str] | None:
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        return trace.format_trace_id(context.trace_id), trace.format_span_id(context.span_id)

    def shutdown(self) -> None:
        """Hand over the last spans and have them exported, waiting at most ``SHUTDOWN_WAIT_S`` in all: the
        SDK's own wait is bounded only by the exporter's timeout per batch, and a hung collector must not
        hold a stop. The export process is waited for (or killed past the bound): none outlives a stop."""
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.shutdown)
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        handed_over = self._outbox.stop(SHUTDOWN_WAIT_S)
        if self._process is not None:
            self._process.stop(handed_over, deadline)
        elif self._exporting is not None:
            self._exporting.shutdown(max(0.0, deadline - time.monotonic()))


def _resource(environ: Mapping[str, str]) -> Resource:
    """``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME`` (read by ``Resource.create``), with our service
    name only where neither names one (attributes given here would override theirs)."""
    attributes: dict[str, Any] = {"service.version": _version()}
    named = environ.get("OTEL_SERVICE_NAME", "").strip() or "service.name=" in environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    if not named:
        attributes["service.name"] = DEFAULT_SERVICE_NAME
    return Resource.create(attributes)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rath-mcp")
    except PackageNotFoundError:
        return "0.0.0+source"
