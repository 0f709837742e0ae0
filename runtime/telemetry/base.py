"""The tracing seam's types: ``Span`` and ``Tracing``, both doing nothing (the real ones: ``otel.py``).

A ``Tracing`` object is made once per process by the CLI (``serve``, ``worker``) from the standard
``OTEL_*`` environment (:func:`from_environment`) and handed down to what emits spans: the MCP
server builder, the provider and sandbox registries. The base class here is the no-op one: its
``span`` hands back one inert ``Span`` (no allocation, no import), ``headers`` is empty. The real
one (``runtime.telemetry.otel``, the ``otel`` extra) is imported only when tracing is asked for.

The vocabulary is OpenTelemetry's (span kinds, attribute names of the semantic conventions) but no
OpenTelemetry type crosses this seam, so ``runtime/`` and ``rath_mcp/`` never import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

#: What a span attribute may hold (OpenTelemetry's ``AttributeValue``).
AttributeValue = str | bool | int | float | Sequence[str] | Sequence[bool] | Sequence[int] | Sequence[float]
Attributes = Mapping[str, AttributeValue | None]
Kind = Literal["internal", "server", "client"]

#: The variables that turn tracing on (either one); ``OTEL_SDK_DISABLED=true`` turns it off again.
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
#: Message contents, tool arguments and results become attributes only when this is ``true``.
CAPTURE_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


class Span:
    """A span being recorded, used as a context manager; this base records nothing."""

    __slots__ = ()

    #: Whether anything set here goes anywhere (callers skip building costly attributes when not).
    recording = False

    def __enter__(self) -> Span:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def set(self, key: str, value: AttributeValue | None) -> None:
        """Set one attribute (``None`` sets nothing)."""

    def set_many(self, attributes: Attributes) -> None:
        """Set several attributes (``None`` values are skipped)."""

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        """Add a span event."""

    def fail(self, error_type: str, description: str | None = None) -> None:
        """Mark the span failed: ``error.type`` and an ERROR status (``description`` is shown only when
        message contents may be recorded, as errors may quote what was sent)."""


class Tracing:
    """Tracing switched off: every method does nothing, imports nothing and allocates nothing."""

    #: Whether spans are recorded at all (callers may skip installing their hooks when not).
    enabled = False
    #: Whether message contents, tool arguments and results may become attributes.
    capture_content = False

    def __init__(self) -> None:
        self._nothing = Span()

    def span(
        self,
        name: str,
        *,
        kind: Kind = "internal",
        attributes: Attributes | None = None,
        carriers: Sequence[Mapping[str, object]] = (),
    ) -> Span:
        """A span named ``name``, the current one while its ``with`` block runs.

        ``carriers``: where a caller's W3C trace context may be (``traceparent``/``tracestate``
        keys), tried in order; the first valid one is the parent, else the current span is.
        """
        return self._nothing

    def headers(self) -> dict[str, str]:
        """The current span's W3C trace context as HTTP headers, for an outgoing call ({} when off)."""
        return {}

    def trace_id(self) -> str | None:
        """The current trace's id (32 hex digits), or ``None`` outside a recorded span."""
        return None

    def ids(self) -> tuple[str, str] | None:
        """The current span's trace id and span id (hex), or ``None`` outside a recorded span."""
        return None

    def shutdown(self) -> None:
        """Send what is still buffered and stop (bounded: a collector that hangs never holds up a stop)."""
