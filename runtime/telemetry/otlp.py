"""The SDK's OTLP/HTTP span exporter, with a cheaper encoding of each batch (the ``otel`` extra).

Everything but the encoding is the SDK's ``OTLPSpanExporter``: the endpoint, headers, timeout,
compression, certificates (``OTEL_EXPORTER_OTLP_*``), the HTTP session and its retries, the size
limit and the exporter's own metrics.

The encoding: the SDK's encoder builds each attribute, value, span and list as a protobuf message of
its own, the protobuf runtime copies each into its parent, and the resource is hashed (a JSON dump
of its attributes) once per span to group the batch: about 25 us of CPU per span, on the export
thread that shares the interpreter lock with the steps being traced (more than a third of what
tracing added to a no-op step). Here the message is written as protobuf's wire format directly,
where that is plain: a request is its resources' bytes, a resource its scopes', a scope its spans',
each a tag, a length and the bytes (concatenation is what a repeated message field is on the wire).
A span's ids, name, kind, times, flags and status are written here; what needs protobuf's own rules
(an attribute's value of any type, an event, a link, the resource and scope) is made by the
protobuf runtime and serialized. An attribute that recurs (``rath.step=review``, ``rath.attempt=1``)
is serialized once and kept. About 6 us per span. What it writes decodes to the message the SDK's
encoder makes (``tests/telemetry/test_otlp_encoding.py``).

The exporter's ``export`` is reached through the SDK's own parts (``_client``, ``_metrics``,
``_max_request_size``, ``_shutdown``), checked once when it is made; an SDK laid out otherwise gets
its own ``export`` unchanged (correct, only slower; that test fails then, so that it is noticed).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as PbResource
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext, SpanKind

log = logging.getLogger(__name__)

#: The SDK exporter's parts ``export`` goes through.
_PARTS = ("_client", "_metrics", "_max_request_size", "_shutdown")

# Wire tags (field number << 3 | wire type) of the fields written here (opentelemetry-proto's trace.proto).
_LEN, _FIXED64, _FIXED32, _VARINT = 2, 1, 5, 0
_REQUEST_RESOURCE_SPANS = bytes([1 << 3 | _LEN])
_RESOURCE, _SCOPE_SPANS, _SCHEMA_URL = bytes([1 << 3 | _LEN]), bytes([2 << 3 | _LEN]), bytes([3 << 3 | _LEN])
_SCOPE, _SPANS = bytes([1 << 3 | _LEN]), bytes([2 << 3 | _LEN])  # in a ScopeSpans (schema_url: 3, as above)
_TRACE_ID = bytes([1 << 3 | _LEN, 16])
_SPAN_ID = bytes([2 << 3 | _LEN, 8])
_TRACE_STATE = bytes([3 << 3 | _LEN])
_PARENT_SPAN_ID = bytes([4 << 3 | _LEN, 8])
_NAME, _KIND = bytes([5 << 3 | _LEN]), bytes([6 << 3 | _VARINT])
_START, _END = bytes([7 << 3 | _FIXED64]), bytes([8 << 3 | _FIXED64])
_ATTRIBUTE = bytes([9 << 3 | _LEN])
_DROPPED_ATTRIBUTES, _EVENT, _DROPPED_EVENTS = (
    bytes([10 << 3 | _VARINT]),
    bytes([11 << 3 | _LEN]),
    bytes([12 << 3 | _VARINT]),
)
_LINK, _DROPPED_LINKS = bytes([13 << 3 | _LEN]), bytes([14 << 3 | _VARINT])
_STATUS = bytes([15 << 3 | _LEN])
_STATUS_MESSAGE, _STATUS_CODE = bytes([2 << 3 | _LEN]), bytes([3 << 3 | _VARINT])
_FLAGS = bytes([(16 << 3 | _FIXED32) & 0x7F | 0x80, (16 << 3 | _FIXED32) >> 7])  # field 16: a two-byte varint tag
_FIXED64_LE, _FIXED32_LE = struct.Struct("<Q").pack, struct.Struct("<I").pack

_KINDS = {kind: bytes([PbSpan.SpanKind.Value(f"SPAN_KIND_{kind.name}")]) for kind in SpanKind}
_HAS_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
_LOCAL_FLAGS, _REMOTE_FLAGS = _FIXED32_LE(_HAS_IS_REMOTE), _FIXED32_LE(_HAS_IS_REMOTE | _IS_REMOTE)
#: Scalar attributes kept serialized: at most this many (then the store starts over), each at most
#: ``KEPT_BYTES`` long (a long value, such as a message's text, is rarely seen twice).
KEPT_ATTRIBUTES = 4096
KEPT_BYTES = 256
_SCALARS = (str, bool, int, float)


def _varint(number: int) -> bytes:
    if number < 0x80:
        return bytes((number,))
    out = bytearray()
    while number >= 0x80:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


class RequestEncoder:
    """Encodes batches of spans (one per exporter: it keeps the attributes it has serialized)."""

    def __init__(self) -> None:
        self._attributes: dict[tuple[str, type, Any], bytes] = {}

    def __call__(self, spans: Sequence[ReadableSpan]) -> bytes:
        """``spans`` as a serialized ``ExportTraceServiceRequest``, grouped by resource and then scope
        (by identity: one of each in a process of ours), in the order they came."""
        groups: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
        for span in spans:
            resource, scope = span.resource, span.instrumentation_scope
            scopes = groups.setdefault(id(resource), (resource, {}))[1]
            scopes.setdefault(id(scope), (scope, []))[1].append(_field(_SPANS, self._span(span)))
        request = []
        for resource, scopes in groups.values():
            made = PbResource()
            _attributes(made.attributes, resource.attributes)
            parts = [_field(_RESOURCE, made.SerializeToString())]
            for scope, encoded in scopes.values():
                scoped = [_field(_SCOPE, _scope(scope)), *encoded]
                if scope is not None and scope.schema_url:
                    scoped.append(_field(_SCHEMA_URL, scope.schema_url.encode()))
                parts.append(_field(_SCOPE_SPANS, b"".join(scoped)))
            if resource.schema_url:
                parts.append(_field(_SCHEMA_URL, resource.schema_url.encode()))
            request.append(_field(_REQUEST_RESOURCE_SPANS, b"".join(parts)))
        return b"".join(request)

    def _span(self, span: ReadableSpan) -> bytes:
        context = span.get_span_context()
        assert context is not None  # a span the SDK made always has one
        parent = span.parent
        name = span.name.encode()
        parts = [_TRACE_ID, context.trace_id.to_bytes(16, "big"), _SPAN_ID, context.span_id.to_bytes(8, "big")]
        if context.trace_state:
            parts.append(_field(_TRACE_STATE, ",".join(f"{k}={v}" for k, v in context.trace_state.items()).encode()))
        if parent is not None:
            parts += (_PARENT_SPAN_ID, parent.span_id.to_bytes(8, "big"))
        parts += (_FLAGS, _flags(parent), _NAME, _varint(len(name)), name, _KIND, _KINDS[span.kind])
        parts += (_START, _FIXED64_LE(span.start_time or 0), _END, _FIXED64_LE(span.end_time or 0))
        # each of these properties makes a new view or tuple (events and links under a lock, 2 us each):
        # the SDK's own lists, where it keeps them there, say first whether there is anything to read
        attributes = span.attributes
        events = span.events if getattr(span, "_events", True) else ()
        links = span.links if getattr(span, "_links", True) else ()
        if attributes:
            parts += self._attributes_of(attributes)
        if span.dropped_attributes:
            parts += (_DROPPED_ATTRIBUTES, _varint(span.dropped_attributes))
        for event in events:
            made = PbSpan.Event(name=event.name, time_unix_nano=event.timestamp)
            _attributes(made.attributes, event.attributes or {})
            made.dropped_attributes_count = event.dropped_attributes
            parts.append(_field(_EVENT, made.SerializeToString()))
        if span.dropped_events:
            parts += (_DROPPED_EVENTS, _varint(span.dropped_events))
        for link in links:
            linked = PbSpan.Link(
                trace_id=link.context.trace_id.to_bytes(16, "big"),
                span_id=link.context.span_id.to_bytes(8, "big"),
                flags=_HAS_IS_REMOTE | _IS_REMOTE if link.context.is_remote else _HAS_IS_REMOTE,
                dropped_attributes_count=link.dropped_attributes,
            )
            _attributes(linked.attributes, link.attributes or {})
            parts.append(_field(_LINK, linked.SerializeToString()))
        if span.dropped_links:
            parts += (_DROPPED_LINKS, _varint(span.dropped_links))
        code, description = span.status.status_code.value, span.status.description
        status = (_STATUS_CODE + _varint(code) if code else b"") + (
            _field(_STATUS_MESSAGE, description.encode()) if description else b""
        )
        parts.append(_field(_STATUS, status))  # present even when unset, as the SDK's encoder sends it
        return b"".join(parts)

    def _attributes_of(self, attributes: Mapping[str, Any]) -> list[bytes]:
        """Each attribute as a span's ``attributes`` field; a scalar one serialized once and kept."""
        kept, found = self._attributes, []
        for key, value in attributes.items():
            hashable = isinstance(value, _SCALARS)
            encoded = kept.get((key, type(value), value)) if hashable else None
            if encoded is None:
                pair = KeyValue(key=key)
                try:
                    _value(pair.value, value)
                except TypeError as error:
                    log.error("span attribute %s not exported: %s", key, error)
                    continue
                encoded = _field(_ATTRIBUTE, pair.SerializeToString())
                if hashable and len(encoded) <= KEPT_BYTES:
                    if len(kept) >= KEPT_ATTRIBUTES:
                        kept.clear()
                    kept[(key, type(value), value)] = encoded  # the type too: True, 1 and 1.0 are equal keys
            found.append(encoded)
        return found


def _flags(parent: SpanContext | None) -> bytes:
    """Whether the parent is known to be remote, as OTLP's span flags say it."""
    return _REMOTE_FLAGS if parent is not None and parent.is_remote else _LOCAL_FLAGS


def _scope(scope: Any) -> bytes:
    made = InstrumentationScope()
    if scope is not None:
        made.name = scope.name
        if scope.version:
            made.version = scope.version
        _attributes(made.attributes, scope.attributes or {})
    body: bytes = made.SerializeToString()
    return body


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
    sending what a :class:`RequestEncoder` makes of each batch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Whether this SDK's exporter has the parts ``export`` sends through (else the SDK's own export).
        self.cheap_encoding = all(hasattr(self, part) for part in _PARTS)
        self._encode = RequestEncoder()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self.cheap_encoding or self._shutdown:
            return super().export(spans)
        with self._metrics.export_operation(len(spans)) as result:
            try:
                body = self._encode(spans)
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
