"""The OTLP/HTTP span exporter of the SDK, with a cheaper encoding of each batch (the ``otel`` extra).

Everything but the encoding is the SDK's ``OTLPSpanExporter``: the endpoint, headers, timeout,
compression, certificates (``OTEL_EXPORTER_OTLP_*``), the HTTP session and its retries, the size
limit and the exporter's own metrics. What differs is how a batch of finished spans becomes an
``ExportTraceServiceRequest``: the SDK's encoder builds each attribute, span and list as a message of
its own, and the protobuf runtime copies each into its parent, then hashes the resource (a JSON dump
of its attributes) once per span to group them. That was about 30 us of CPU per span, more than
making the span (it runs in the export process, ``export_process.py``, off the traced process). Here
each message is made in place in its parent (``add``), grouped by the identity of the resource and
scope (one each in a process of ours), which takes about a third of that. The request it makes
decodes to the same message the SDK's encoder makes (``tests/telemetry/test_otlp_encoding.py``).

The exporter's ``export`` is reached through the SDK's own parts (``_client``, ``_metrics``,
``_max_request_size``, ``_shutdown``), checked once when it is made; an SDK laid out otherwise gets its own
``export`` unchanged (correct, only slower).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext, SpanKind

log = logging.getLogger(__name__)

_KINDS = {kind: PbSpan.SpanKind.Value(f"SPAN_KIND_{kind.name}") for kind in SpanKind}
_HAS_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
#: The SDK exporter's parts ``export`` goes through (present since the exporter's HTTP client split).
_PARTS = ("_client", "_metrics", "_max_request_size", "_shutdown")


def encode_request(spans: Sequence[ReadableSpan]) -> bytes:
    """``spans`` as the body of an OTLP/HTTP traces request (a serialized ``ExportTraceServiceRequest``)."""
    request = ExportTraceServiceRequest()
    groups: dict[tuple[int, int], Any] = {}  # (resource, scope) by identity -> the scope's ``spans.add``
    resources: dict[int, Any] = {}
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope
        add = groups.get((id(resource), id(scope)))
        if add is None:
            held = resources.get(id(resource))
            if held is None:
                held = resources[id(resource)] = request.resource_spans.add(schema_url=resource.schema_url)
                held.resource.SetInParent()  # present even when empty, as the SDK's encoder sends it
                _attributes(held.resource.attributes, resource.attributes)
            scoped = held.scope_spans.add(schema_url=scope.schema_url if scope else "")
            _scope(scoped.scope, scope)
            add = groups[(id(resource), id(scope))] = scoped.spans.add
        _span(add(), span)
    body: bytes = request.SerializePartialToString()
    return body


def _span(out: PbSpan, span: ReadableSpan) -> None:
    context = span.get_span_context()
    assert context is not None  # a span the SDK made always has one
    parent = span.parent
    out.trace_id = context.trace_id.to_bytes(16, "big")
    out.span_id = context.span_id.to_bytes(8, "big")
    if context.trace_state:
        out.trace_state = ",".join(f"{key}={value}" for key, value in context.trace_state.items())
    if parent is not None:
        out.parent_span_id = parent.span_id.to_bytes(8, "big")
    out.flags = _flags(parent)
    out.name = span.name
    out.kind = _KINDS[span.kind]
    out.start_time_unix_nano = span.start_time or 0
    out.end_time_unix_nano = span.end_time or 0
    if span.attributes:
        _attributes(out.attributes, span.attributes)
    out.dropped_attributes_count = span.dropped_attributes
    for event in span.events:
        made = out.events.add(name=event.name, time_unix_nano=event.timestamp)
        if event.attributes:
            _attributes(made.attributes, event.attributes)
        made.dropped_attributes_count = event.dropped_attributes
    out.dropped_events_count = span.dropped_events
    for link in span.links:
        linked = out.links.add(
            trace_id=link.context.trace_id.to_bytes(16, "big"),
            span_id=link.context.span_id.to_bytes(8, "big"),
            flags=_flags(link.context),
        )
        if link.attributes:
            _attributes(linked.attributes, link.attributes)
        linked.dropped_attributes_count = link.dropped_attributes
    out.dropped_links_count = span.dropped_links
    out.status.SetInParent()  # present even when unset, as the SDK's encoder sends it
    out.status.code = span.status.status_code.value  # type: ignore[assignment]  # the enum's number
    if span.status.description:
        out.status.message = span.status.description


def _flags(parent: SpanContext | None) -> int:
    """Whether the parent (or a link's span) is known to be remote, as OTLP's span flags say it."""
    return _HAS_IS_REMOTE | _IS_REMOTE if parent is not None and parent.is_remote else _HAS_IS_REMOTE


def _scope(out: InstrumentationScope, scope: Any) -> None:
    out.SetInParent()
    if scope is None:
        return
    out.name = scope.name
    if scope.version:
        out.version = scope.version
    if scope.attributes:
        _attributes(out.attributes, scope.attributes)


def _attributes(out: Any, attributes: Mapping[str, Any]) -> None:
    """Append ``attributes`` to a repeated ``KeyValue`` field (one whose value cannot be encoded is
    left out and logged, as the SDK's encoder does)."""
    for key, value in attributes.items():
        pair: KeyValue = out.add(key=key)
        try:
            _value(pair.value, value)
        except TypeError as error:
            del out[-1]
            log.error("span attribute %s not exported: %s", key, error)


def _value(out: AnyValue, value: Any) -> None:
    # bool before int (a bool is an int), str and bytes before Sequence (both are sequences)
    if isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, int):
        out.int_value = value
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, bytes):
        out.bytes_value = value
    elif isinstance(value, Sequence):
        values = out.array_value.values
        for item in value:
            _value(values.add(), item)
    elif isinstance(value, Mapping):
        pairs = out.kvlist_value.values
        for key, item in value.items():
            _value(pairs.add(key=str(key)).value, item)
    elif value is not None:
        raise TypeError(f"a {type(value).__name__} is no attribute value")


class OtlpSpanExporter(OTLPSpanExporter):
    """The SDK's OTLP/HTTP span exporter (configured by the same ``OTEL_EXPORTER_OTLP_*`` variables),
    sending what :func:`encode_request` makes of each batch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Whether this SDK's exporter has the parts ``export`` sends through (else the SDK's own export).
        self.cheap_encoding = all(hasattr(self, part) for part in _PARTS)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self.cheap_encoding or self._shutdown:
            return super().export(spans)
        with self._metrics.export_operation(len(spans)) as result:
            try:
                body = encode_request(spans)
            except Exception as error:  # a batch that cannot be encoded is dropped, never raised into the SDK
                log.error("span batch not exported: %s", error)
                result.error = error
                return SpanExportResult.FAILURE
            if 0 < self._max_request_size < len(body):
                log.warning("span batch of %d bytes dropped: over %d", len(body), self._max_request_size)
                result.error = ValueError(f"{len(body)} bytes over the {self._max_request_size}-byte limit")
                return SpanExportResult.FAILURE
            sent = self._client.export(body)
            if not sent.success:
                result.error = sent.error
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS
