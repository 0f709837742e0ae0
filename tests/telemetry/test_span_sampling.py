"""Spans follow the configured sampler (``OTEL_TRACES_SAMPLER``) and span limits (``OTEL_SPAN_*``,
``OTEL_ATTRIBUTE_*``), read from the environment as the SDK reads them.

Our spans are not the SDK's ``Span`` (``runtime/telemetry/otel_spans.py``) but the decision is still
the provider's sampler's, asked for each span. Parents are given as W3C carriers with trace ids
chosen on either side of a ratio sampler's bound (the low 64 bits of the id against rate x 2^64), so
which span is sampled is known before it is made.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runtime.telemetry.otel import OtelTracing

LOW = "0af7651916cd43dd0000000000000001"  # below any ratio's bound: a ratio sampler keeps it
HIGH = "0af7651916cd43ddfffffffffffffff0"  # above a ratio of 0.5's bound: dropped
PARENT_SPAN = "b7ad6b7169203331"


def carrier(trace_id: str, sampled: bool) -> dict[str, object]:
    return {"traceparent": f"00-{trace_id}-{PARENT_SPAN}-{'01' if sampled else '00'}"}


def traced(exporter: InMemorySpanExporter) -> dict[str, list[str]]:
    """Under parents (trace id, sampled flag) of every kind, a span each with a child; the traceparent the
    child would send out, by parent."""
    tracing = OtelTracing(exporter)
    sent = {}
    try:
        for trace_id, sampled in ((LOW, True), (HIGH, True), (LOW, False), (HIGH, False)):
            name = f"{'low' if trace_id == LOW else 'high'} {'sampled' if sampled else 'unsampled'}"
            parent = carrier(trace_id, sampled)
            with tracing.span(name, carriers=[parent]) as span, tracing.span(f"{name} child") as child:
                child.set("recorded", span.recording)
                sent[name] = tracing.headers()["traceparent"].split("-")[1::2]  # trace id, flags
    finally:
        tracing.shutdown()
    return sent


def exported(exporter: InMemorySpanExporter) -> list[str]:
    return sorted(span.name for span in exporter.get_finished_spans())


@pytest.mark.parametrize("sampler", [None, "parentbased_always_on", "parentbased_traceidratio"])
def test_a_parent_based_sampler_follows_the_parents_flag(sampler: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if sampler is None:
        monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)  # the default: parentbased_always_on
    else:
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", sampler)
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0")  # a ratio keeping no root: parents decide here
    exporter = InMemorySpanExporter()
    sent = traced(exporter)
    assert exported(exporter) == ["high sampled", "high sampled child", "low sampled", "low sampled child"]
    assert sent == {
        "low sampled": [LOW, "01"],
        "high sampled": [HIGH, "01"],
        "low unsampled": [LOW, "00"],  # an unsampled span's children say so downstream too
        "high unsampled": [HIGH, "00"],
    }
    child = next(s for s in exporter.get_finished_spans() if s.name == "low sampled child")
    parent = next(s for s in exporter.get_finished_spans() if s.name == "low sampled")
    assert child.parent is not None and parent.context is not None and parent.parent is not None
    assert child.parent.span_id == parent.context.span_id and child.context.trace_id == int(LOW, 16)
    assert format(parent.parent.span_id, "016x") == PARENT_SPAN and parent.parent.is_remote
    assert child.attributes == {"recorded": True}


def test_a_ratio_sampler_decides_by_trace_id_whatever_the_parent_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")
    exporter = InMemorySpanExporter()
    sent = traced(exporter)
    assert exported(exporter) == ["low sampled", "low sampled child", "low unsampled", "low unsampled child"]
    assert {name: flags for name, (_, flags) in sent.items()} == {
        "low sampled": "01",
        "high sampled": "00",
        "low unsampled": "01",
        "high unsampled": "00",
    }


def test_always_on_records_every_span_whatever_the_parent_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_on")
    exporter = InMemorySpanExporter()
    sent = traced(exporter)
    assert len(exporter.get_finished_spans()) == 8
    assert {flags for _, flags in sent.values()} == {"01"}


def test_a_root_span_under_a_ratio_of_zero_is_unsampled_and_so_are_its_children(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0")
    exporter = InMemorySpanExporter()
    tracing = OtelTracing(exporter)
    try:
        with tracing.span("root") as root, tracing.span("child") as child:
            flags = tracing.headers()["traceparent"][-2:]
    finally:
        tracing.shutdown()
    assert not root.recording and not child.recording and flags == "02"  # random trace id, unsampled
    assert exporter.get_finished_spans() == ()


def test_always_off_records_nothing_but_still_passes_ids_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    exporter = InMemorySpanExporter()
    tracing = OtelTracing(exporter)
    try:
        with tracing.span("request", kind="server") as span:
            span.set("ignored", 1)
            span.event("ignored")
            ids = tracing.ids()
            headers = tracing.headers()
    finally:
        tracing.shutdown()
    assert not span.recording and exporter.get_finished_spans() == ()
    assert ids is not None and headers["traceparent"] == f"00-{ids[0]}-{ids[1]}-02"  # random id, unsampled


def test_span_limits_from_the_environment_bound_what_is_exported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "2")
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "4")
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "1")
    exporter = InMemorySpanExporter()
    tracing = OtelTracing(exporter)
    try:
        with tracing.span("bounded", attributes={"a": "first", "b": None}) as span:
            span.set_many({"c": "third", "d": ["long one", "x"]})
            span.event("dropped")
            span.event("kept", {"e": "abcdefgh"})  # the latest, as the SDK keeps them
    finally:
        tracing.shutdown()
    (found,) = exporter.get_finished_spans()
    assert dict(found.attributes or {}) == {"c": "thir", "d": ("long", "x")}  # the latest two, cut to 4
    assert found.dropped_attributes == 1 and found.dropped_events == 1
    assert [(e.name, dict(e.attributes or {})) for e in found.events] == [("kept", {"e": "abcd"})]
