"""Tracing switched on: OpenTelemetry's SDK exporting OTLP over HTTP/protobuf (the ``otel`` extra).

Everything is configured by the standard ``OTEL_*`` variables, read by the SDK itself: the endpoint
(``OTEL_EXPORTER_OTLP_ENDPOINT`` gets ``/v1/traces`` appended, ``…_TRACES_ENDPOINT`` is used as
given), headers, timeout and compression, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_SERVICE_NAME`` (here
``rath-mcp`` unless set), the sampler (``OTEL_TRACES_SAMPLER``) and the batch settings
(``OTEL_BSP_*``). Spans are handed to a ``BatchSpanProcessor``: ending one only appends it to a
queue, and a background thread exports; a collector that is down or slow costs requests nothing
(the queue drops spans past ``OTEL_BSP_MAX_QUEUE_SIZE``).

No global is set (OpenTelemetry's global tracer provider stays untouched): the one ``OtelTracing``
of a process is made by the CLI and passed to what emits spans. The current span does live in
OpenTelemetry's context (a ``contextvars`` variable), so spans nest across ``await`` as code does.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from runtime.extras import require_extra
from runtime.telemetry.base import CAPTURE_VARIABLE, Attributes, Kind, Span, Tracing

require_extra("opentelemetry.sdk.trace", "otel")
require_extra("opentelemetry.exporter.otlp.proto.http.trace_exporter", "otel")
require_extra("opentelemetry.proto.trace.v1.trace_pb2", "otel")

import opentelemetry.context as otel_context  # noqa: E402  (after the check naming the extra)
import opentelemetry.trace as trace  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter  # noqa: E402
from opentelemetry.sdk.util.instrumentation import InstrumentationScope  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator  # noqa: E402

from runtime.telemetry.otel_spans import Recorder  # noqa: E402
from runtime.telemetry.otlp import OtlpSpanExporter  # noqa: E402

DEFAULT_SERVICE_NAME = "rath-mcp"
#: The longest a stop waits for the last spans to be sent; past it they are dropped (a hung collector).
SHUTDOWN_WAIT_S = 5.0
_KINDS = {"internal": SpanKind.INTERNAL, "server": SpanKind.SERVER, "client": SpanKind.CLIENT}
_CONTEXT_KEYS = ("traceparent", "tracestate")


class OtelTracing(Tracing):
    """Spans made with an SDK ``TracerProvider`` of our own (``otel_spans.py``) and exported in batches."""

    enabled = True

    def __init__(self, exporter: SpanExporter, *, capture_content: bool = False, resource: Resource | None = None):
        super().__init__()
        self.capture_content = capture_content
        # the provider reads the sampler (OTEL_TRACES_SAMPLER) and owns the processor's shutdown; spans
        # are made by the Recorder (otel_spans.py) with its sampler, ids and resource
        self._provider = TracerProvider(resource=resource or _resource({}))
        processor = BatchSpanProcessor(exporter)  # OTEL_BSP_* read by the processor
        self._provider.add_span_processor(processor)
        self._recorder = Recorder(self._provider, processor, InstrumentationScope("rath-mcp", _version()))
        self._propagator = TraceContextTextMapPropagator()
        self._stopped = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> OtelTracing:
        """The OTLP/HTTP exporter and resource the ``OTEL_*`` variables describe."""
        capture = environ.get(CAPTURE_VARIABLE, "").strip().lower() == "true"
        return cls(OtlpSpanExporter(), capture_content=capture, resource=_resource(environ))

    def span(
        self,
        name: str,
        *,
        kind: Kind = "internal",
        attributes: Attributes | None = None,
        carriers: Sequence[Mapping[str, object]] = (),
    ) -> Span:
        parent = self._parent(carriers) if carriers else None
        return self._recorder.start(name, _KINDS[kind], attributes, parent, self.capture_content)

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
        """Flush and stop in a helper thread, waited for at most ``SHUTDOWN_WAIT_S``: the SDK's own wait
        is bounded only by the exporter's timeout per batch, and a hung collector must not hold a stop."""
        if self._stopped:
            return
        self._stopped = True
        stopping = threading.Thread(target=self._provider.shutdown, name="rath-otel-shutdown", daemon=True)
        stopping.start()
        stopping.join(SHUTDOWN_WAIT_S)


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
