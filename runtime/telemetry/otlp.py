"""The OTLP/HTTP span exporter of the SDK, with a cheaper encoding of each batch (the ``otel`` extra).

Everything but the encoding is the SDK's ``OTLPSpanExporter``: the endpoint, headers, timeout,
compression, certificates (``OTEL_EXPORTER_OTLP_*``), the HTTP session and its retries, the size
limit and the exporter's own metrics. What differs is how a batch of finished spans becomes the body
of an ``ExportTraceServiceRequest``: the SDK's encoder builds each attribute, span and list as a
message of its own, and the protobuf runtime copies each into its parent, then hashes the resource (a
JSON dump of its attributes) once per span to group them: about 25 us of CPU per span, on the export
thread that shares the interpreter lock with the steps being traced. ``otlp_wire.encode_request``
writes protobuf's wire format itself (4-5 us a span; building the messages in place in their parents
took 7-10), and the request decodes to the same message the SDK's encoder makes
(``tests/telemetry/test_otlp_encoding.py``).

The exporter's ``export`` is reached through the SDK's own parts (``_client``, ``_metrics``,
``_max_request_size``, ``_shutdown``), checked once when it is made; an SDK laid out otherwise gets its own
``export`` unchanged (correct, only slower).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from runtime.telemetry.otlp_wire import encode_request

log = logging.getLogger(__name__)

#: The SDK exporter's parts ``export`` goes through (present since the exporter's HTTP client split).
_PARTS = ("_client", "_metrics", "_max_request_size", "_shutdown")
__all__ = ["OtlpSpanExporter", "encode_request"]


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
