"""A local OTLP/HTTP trace receiver for the tests: what a collector (Jaeger, Tempo) would be sent.

A small HTTP server on 127.0.0.1 that decodes each ``POST /v1/traces`` body as an
``ExportTraceServiceRequest`` (``opentelemetry-proto``) and keeps its spans. Tests wait on what
arrives (``wait_for``: a condition signalled by each export), never on time. ``hang=True`` makes it
hold every export unanswered until ``release()`` (a collector that is stuck), and ``held`` is set
once the first export is being held.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

WAIT_S = 30.0  # a safety net for a span that never comes (the bug), not a synchronisation
KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, which) if which else None


@dataclass
class ReceivedSpan:
    """One exported span, decoded."""

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    resource: dict[str, Any]
    events: list[str] = field(default_factory=list)
    event_attributes: list[dict[str, Any]] = field(default_factory=list)  # each event's, in order

    @property
    def failed(self) -> bool:
        return self.status_code == 2


class Receiver:
    """The spans received so far, and a condition signalled whenever more arrive."""

    def __init__(self, *, hang: bool = False) -> None:
        self.spans: list[ReceivedSpan] = []
        self.hang = hang
        self.held = threading.Event()
        self._released = threading.Event()
        self._arrived = threading.Condition()
        self.url = ""

    def release(self) -> None:
        """Let held exports (``hang=True``) be answered, and every later one at once."""
        self._released.set()

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        ReceivedSpan(
                            name=span.name,
                            kind=KINDS.get(span.kind, str(span.kind)),
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            status_code=span.status.code,
                            status_message=span.status.message,
                            resource=resource,
                            events=[e.name for e in span.events],
                            event_attributes=[{a.key: _value(a.value) for a in e.attributes} for e in span.events],
                        )
                    )
        with self._arrived:
            self.spans.extend(found)
            self._arrived.notify_all()

    def wait_for(self, matches: Callable[[ReceivedSpan], bool], count: int = 1) -> list[ReceivedSpan]:
        """The first ``count`` received spans that ``matches``, waiting for them to arrive."""
        with self._arrived:
            ok = self._arrived.wait_for(lambda: len([s for s in self.spans if matches(s)]) >= count, WAIT_S)
            found = [s for s in self.spans if matches(s)]
        assert ok, f"no {count} matching span(s) arrived; received: {[s.name for s in self.spans]}"
        return found[:count]

    def named(self, name: str) -> ReceivedSpan:
        return self.wait_for(lambda s: s.name == name)[0]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if receiver.hang and not receiver._released.is_set():
                receiver.held.set()
                receiver._released.wait()
            if self.path.rstrip("/") != "/v1/traces":
                self.send_error(404)
                return
            receiver.take(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the tests read the spans
            pass

    return Handler


@contextmanager
def receiving(*, hang: bool = False) -> Iterator[Receiver]:
    """A receiver listening on a free port of 127.0.0.1 for the life of the block (``url``: its base)."""
    receiver = Receiver(hang=hang)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release()
        server.shutdown()
        server.server_close()
        thread.join()


def trace_env(url: str, **extra: str) -> dict[str, str]:
    """The ``OTEL_*`` variables that send a process's traces to ``url``, exported without delay."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": url,
        "OTEL_BSP_SCHEDULE_DELAY": "10",  # export each span soon after it ends: the tests wait on arrival
        "OTEL_EXPORTER_OTLP_TIMEOUT": "5",
        **extra,
    }
