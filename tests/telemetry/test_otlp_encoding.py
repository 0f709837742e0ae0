"""Our OTLP encoding of a batch of spans is the message the SDK's own encoder makes (``runtime.telemetry.otlp``).

The spans are the SDK's own, made by a real ``TracerProvider`` and kept by an in-memory exporter,
covering what a span can hold: every attribute type, events, links, an error status with its
description, a remote parent with a trace state, each kind, and two tracers (two scopes). Both
encodings are decoded and compared as messages. Then the exporter end to end: a batch sent to the
local OTLP/HTTP receiver arrives with its parent, attributes and status.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags, TraceState
from opentelemetry.util.types import AttributeValue

from runtime.telemetry.otlp import OtlpSpanExporter, encode_request
from tests.otel_receiver import receiving


class Kept(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def made_spans() -> list[ReadableSpan]:
    kept = Kept()
    provider = TracerProvider(resource=Resource.create({"service.name": "rath-mcp", "deployment": "test"}))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    ours = provider.get_tracer("rath-mcp", "1.2.3")
    other = provider.get_tracer("other", schema_url="https://opentelemetry.io/schemas/1.26.0")
    remote = SpanContext(
        0x0AF7651916CD43DD8448EB211C80319C,
        0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", "abc"), ("other", "x1")]),
    )
    values: dict[str, AttributeValue] = {
        "text": "tools/call",
        "flag": True,
        "count": 3,
        "ratio": 0.25,
        "names": ("a", "b"),
        "numbers": (1, 2, 3),
        "flags": (True, False),
        "floats": (0.5, 1.5),
    }
    with ours.start_as_current_span(
        "tools/call session_fork", context=trace.set_span_in_context(NonRecordingSpan(remote)), kind=SpanKind.SERVER
    ) as request:
        request.set_attributes(values)
        with ours.start_as_current_span("run approval", attributes={"rath.run_id": "run-1"}) as run:
            run.add_event("lease.taken_over", {"rath.lost_leases": 1})
            run.add_event("plain")
            with ours.start_as_current_span("step review", attributes={"rath.step": "review", "rath.attempt": 2}):
                pass
            with ours.start_as_current_span("chat m", kind=SpanKind.CLIENT) as model:
                model.set_status(StatusCode.ERROR, "the model refused")
                model.set_attribute("error.type", "ProviderError")
        with other.start_as_current_span("linked", links=[Link(remote, {"why": "follows"})], kind=SpanKind.PRODUCER):
            pass
        with other.start_as_current_span("ok", kind=SpanKind.CONSUMER) as done:
            done.set_status(StatusCode.OK)
    return kept.spans


def test_our_encoding_is_the_sdks() -> None:
    spans = made_spans()
    assert len(spans) == 6
    ours = ExportTraceServiceRequest.FromString(encode_request(spans))
    theirs = encode_spans(spans)
    assert ours == theirs, f"ours:\n{ours}\nthe SDK's:\n{theirs}"
    scopes = [scope.scope.name for scope in ours.resource_spans[0].scope_spans]
    assert scopes == ["rath-mcp", "other"]  # a check that the batch did hold what it was meant to


def test_an_attribute_that_cannot_be_encoded_is_left_out() -> None:
    made = made_spans()[0]  # the SDK's own checks refuse such a value: a span read from elsewhere may not
    odd = ReadableSpan(
        name=made.name,
        context=made.context,
        resource=made.resource,
        attributes={**(made.attributes or {}), "odd": object()},  # type: ignore[dict-item]
        instrumentation_scope=made.instrumentation_scope,
        start_time=made.start_time,
        end_time=made.end_time,
    )
    decoded = ExportTraceServiceRequest.FromString(encode_request([odd]))
    keys = [pair.key for pair in decoded.resource_spans[0].scope_spans[0].spans[0].attributes]
    assert "odd" not in keys and "rath.step" in keys


def test_the_exporter_sends_what_it_encodes() -> None:
    with receiving() as receiver:
        exporter = OtlpSpanExporter(endpoint=f"{receiver.url}/v1/traces")
        assert exporter.cheap_encoding  # this SDK's exporter has the parts the cheap path sends through
        spans = made_spans()
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        got = {span.name: span for span in receiver.wait_for(lambda span: True, count=6)}
    request = got["tools/call session_fork"]
    assert request.parent_span_id == "b7ad6b7169203331" and request.attributes["names"] == ["a", "b"]
    assert got["step review"].attributes == {"rath.step": "review", "rath.attempt": 2}
    assert got["chat m"].failed and got["chat m"].status_message == "the model refused"
    assert got["run approval"].events == ["lease.taken_over", "plain"]


def spans_of(attributes: list[dict[str, AttributeValue]]) -> list[ReadableSpan]:
    kept = Kept()
    provider = TracerProvider(resource=Resource.create({"service.name": "rath-mcp"}))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("rath-mcp")
    for each in attributes:
        with tracer.start_as_current_span("step s", attributes=each):
            pass
    return kept.spans


def test_values_at_the_edges_encode_as_the_sdks() -> None:
    long = "é" * 100  # 200 bytes: a length of two varint bytes
    spans = spans_of(
        [
            {"n": -1, "big": 2**63 - 1, "small": -(2**63), "zero": 0, "f": -0.0, "empty": ""},
            {"text": long, "texts": (long, "", "ü"), "many": tuple(range(-70, 70))},
            {f"key {i}": i for i in range(130)},  # over the limit of 128: a dropped count
        ]
    )
    assert ExportTraceServiceRequest.FromString(encode_request(spans)) == encode_spans(spans)
