"""A batch of finished spans as an OTLP ``ExportTraceServiceRequest``, written in protobuf's wire format.

The export thread shares the interpreter lock with the steps being traced, so what it spends per span
is taken from them. Building the request out of ``opentelemetry-proto`` messages (even made in place
in their parents) cost about 8 us of CPU a span, most of it crossing into the protobuf runtime once
per field, attribute and value. Here each span is a few ``bytes`` joined, and each attribute's
encoded ``KeyValue`` is kept by (key, type, value) in a bounded table: a step span's attributes (its
run id, step name, attempt, outcome) repeat across the thousands of spans of a busy worker, so most
of them are one dict lookup.

The format is the one in ``opentelemetry/proto/trace/v1/trace.proto`` and ``common.proto``: a
field is its tag (number << 3 | wire type) then a varint, 8 or 4 little-endian bytes, or a length
and that many bytes; proto3 leaves out scalar fields at their default, but a set ``oneof`` member
(an ``AnyValue``'s value) is always written, and the span's status, the resource and the scope are
written even when empty, as the SDK's encoder does. The request decodes to the message the SDK's own
encoder makes (``tests/telemetry/test_otlp_encoding.py`` compares them).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, StatusCode

log = logging.getLogger(__name__)

#: A span's kind field: OTLP's ``SpanKind`` numbers (UNSPECIFIED is 0, so the API's INTERNAL=0 is 1).
_KINDS = {kind: bytes([0x30, kind.value + 1]) for kind in SpanKind}
_INTERNAL_KIND = _KINDS[SpanKind.INTERNAL]
#: ``SpanFlags``: whether the parent's remoteness is known (always, here), and that it is remote.
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
#: A span's flags field (16, fixed32) for a local parent or none, and for a remote one.
_LOCAL_PARENT = b"\x85\x01" + _HAS_IS_REMOTE.to_bytes(4, "little")
_REMOTE_PARENT = b"\x85\x01" + (_HAS_IS_REMOTE | _IS_REMOTE).to_bytes(4, "little")
_UNSET_STATUS = b"\x7a\x00"
#: The most encoded attributes kept; past it the table starts over (a worker's run ids keep changing).
KEPT_ATTRIBUTES = 4096
_kept: dict[tuple[str, type, Any], bytes] = {}  # each one's length, then its fields
_SMALL = [bytes([n]) for n in range(128)]
_double = struct.Struct("<d").pack
_INT64 = 1 << 63


def encode_request(spans: Sequence[ReadableSpan]) -> bytes:
    """``spans`` as the body of an OTLP/HTTP traces request (a serialized ``ExportTraceServiceRequest``)."""
    groups: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}  # resource, then scope, by identity
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope
        scopes = groups.setdefault(id(resource), (resource, {}))[1]
        scopes.setdefault(id(scope), (scope, []))[1].append(_span(span))
    out = []
    for resource, scopes in groups.values():
        body = [_field(b"\x0a", _attributes(b"\x0a", resource.attributes))]  # the resource, present even empty
        for scope, encoded in scopes.values():
            body.append(_field(b"\x12", _scope_spans(scope, encoded)))
        if resource.schema_url:
            body.append(_field(b"\x1a", resource.schema_url.encode()))
        out.append(_field(b"\x0a", b"".join(body)))
    return b"".join(out)


def _scope_spans(scope: Any, spans: list[bytes]) -> bytes:
    described = b""
    if scope is not None:
        described = _text(b"\x0a", scope.name) + (_text(b"\x12", scope.version) if scope.version else b"")
        if scope.attributes:
            described += _attributes(b"\x1a", scope.attributes)
    body = [_field(b"\x0a", described)]  # the scope, present even when empty
    body.extend(_field(b"\x12", span) for span in spans)
    if scope is not None and scope.schema_url:
        body.append(_field(b"\x1a", scope.schema_url.encode()))
    return b"".join(body)


def _span(span: ReadableSpan) -> bytes:
    context = span.get_span_context()
    assert context is not None  # a span made by the SDK or by otel_spans always has one
    parent = span.parent
    out = [b"\x0a\x10", context.trace_id.to_bytes(16, "big"), b"\x12\x08", context.span_id.to_bytes(8, "big")]
    if context.trace_state:
        out.append(_text(b"\x1a", ",".join(f"{key}={value}" for key, value in context.trace_state.items())))
    if parent is not None:
        out += (b"\x22\x08", parent.span_id.to_bytes(8, "big"))
    out.append(_text(b"\x2a", span.name))
    kind = span.kind
    out.append(_INTERNAL_KIND if kind is SpanKind.INTERNAL else _KINDS[kind])  # (an enum's hash is Python code)
    if span.start_time:
        out += (b"\x39", span.start_time.to_bytes(8, "little"))
    if span.end_time:
        out += (b"\x41", span.end_time.to_bytes(8, "little"))
    if span.attributes:
        out.append(_attributes(b"\x4a", span.attributes))
    if dropped := span.dropped_attributes:
        out += (b"\x50", _varint(dropped))
    for event in span.events:
        described = [b"\x09", (event.timestamp or 0).to_bytes(8, "little"), _text(b"\x12", event.name)]
        if event.attributes:
            described.append(_attributes(b"\x1a", event.attributes))
        if dropped := event.dropped_attributes:
            described += (b"\x20", _varint(dropped))
        out.append(_field(b"\x5a", b"".join(described)))
    if dropped := span.dropped_events:
        out += (b"\x60", _varint(dropped))
    for link in span.links:
        ids = link.context
        linked = [b"\x0a\x10", ids.trace_id.to_bytes(16, "big"), b"\x12\x08", ids.span_id.to_bytes(8, "big")]
        if link.attributes:
            linked.append(_attributes(b"\x22", link.attributes))
        if dropped := link.dropped_attributes:
            linked += (b"\x28", _varint(dropped))
        linked += (b"\x35", _flags(link.context).to_bytes(4, "little"))
        out.append(_field(b"\x6a", b"".join(linked)))
    if dropped := span.dropped_links:
        out += (b"\x70", _varint(dropped))
    status = span.status
    if status.status_code is StatusCode.UNSET and not status.description:
        out.append(_UNSET_STATUS)  # present even when unset, as the SDK's encoder sends it
    else:
        code = status.status_code.value
        fields = (_text(b"\x12", status.description) if status.description else b"") + (
            b"\x18" + _varint(code) if code else b""
        )
        out.append(_field(b"\x7a", fields))
    out.append(_REMOTE_PARENT if parent is not None and parent.is_remote else _LOCAL_PARENT)
    return b"".join(out)


def _flags(parent: SpanContext | None) -> int:
    """Whether the parent (or a link's span) is known to be remote, as OTLP's span flags say it."""
    return _HAS_IS_REMOTE | _IS_REMOTE if parent is not None and parent.is_remote else _HAS_IS_REMOTE


def _attributes(tag: bytes, attributes: Mapping[str, Any]) -> bytes:
    """Each of ``attributes`` as a ``KeyValue`` field ``tag`` (one whose value cannot be encoded is left out
    and logged, as the SDK's encoder does)."""
    out: list[bytes] = []
    for key, value in attributes.items():
        known = (key, type(value), value) if isinstance(value, (str, int, float)) else None  # bool is an int
        sized = _kept.get(known) if known is not None else None  # the pair after its length
        if sized is None:
            try:
                pair = _pair(key, value)
            except TypeError as error:
                log.error("span attribute %s not exported: %s", key, error)
                continue
            sized = _varint(len(pair)) + pair
            if known is not None:
                if len(_kept) >= KEPT_ATTRIBUTES:
                    _kept.clear()
                _kept[known] = sized
        out += (tag, sized)
    return b"".join(out)


def _pair(key: str, value: Any) -> bytes:
    """A ``KeyValue``'s fields (a ``None`` value leaves the value unset)."""
    return _text(b"\x0a", key) + (b"" if value is None else _field(b"\x12", _value(value)))


def _value(value: Any) -> bytes:
    """An ``AnyValue``'s fields; bool before int (a bool is an int), str and bytes before Sequence."""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return _text(b"\x0a", value)
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise TypeError(f"{value} is out of an int64's range")
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)  # int64: a negative one as its two's complement
    if isinstance(value, float):
        return b"\x21" + _double(value)
    if isinstance(value, bytes):
        return _field(b"\x3a", value)
    if isinstance(value, Sequence):
        return _field(b"\x2a", b"".join(_field(b"\x0a", _value(item)) for item in value))
    if isinstance(value, Mapping):
        pairs = (_field(b"\x0a", _pair(str(key), item)) for key, item in value.items())
        return _field(b"\x32", b"".join(pairs))
    if value is None:
        return b""  # an AnyValue with nothing set (in a list; a pair's None value is left out: _pair)
    raise TypeError(f"a {type(value).__name__} is no attribute value")


def _text(tag: bytes, text: str) -> bytes:
    return _field(tag, text.encode())


def _field(tag: bytes, data: bytes) -> bytes:
    size = len(data)
    return tag + (_SMALL[size] if size < 128 else _varint(size)) + data


def _varint(number: int) -> bytes:
    if number < 128:
        return _SMALL[number]
    out = bytearray()
    while number > 127:
        out.append(number & 127 | 128)
        number >>= 7
    out.append(number)
    return bytes(out)
