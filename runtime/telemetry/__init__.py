"""Tracing: a seam that costs nothing when off (CONTRACT §12).

A ``Tracing`` object is made once per process by the CLI (``serve``, ``worker``) from the standard
``OTEL_*`` environment (:func:`from_environment`) and handed down to what emits spans: the MCP
server builder, the provider and sandbox registries. The base one (``base.py``) is the no-op: its
``span`` hands back one inert ``Span`` (no allocation, no import), ``headers`` is empty. The real
one (``otel.py``, the ``otel`` extra) is imported only when tracing is asked for.

The vocabulary is OpenTelemetry's (span kinds, attribute names of the semantic conventions) but no
OpenTelemetry type crosses this seam, so the rest of ``runtime/`` and ``rath_mcp/`` never import it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from runtime.telemetry.base import (
    CAPTURE_VARIABLE,
    ENDPOINT_VARIABLES,
    Attributes,
    AttributeValue,
    Kind,
    Span,
    Tracing,
)


def requested(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` asks for traces: an OTLP endpoint set, the SDK not disabled."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def from_environment(environ: Mapping[str, str] | None = None) -> Tracing:
    """The tracing the ``OTEL_*`` environment asks for: the no-op one unless :func:`requested`.

    Raises ``MissingExtraError`` (one line naming ``rath-mcp[otel]``) when traces are asked for and
    the extra is not installed; ``serve`` and ``worker`` say so and go on without traces.
    """
    environ = os.environ if environ is None else environ
    if not requested(environ):
        return Tracing()
    from runtime.telemetry.otel import OtelTracing

    return OtelTracing.from_environment(environ)


__all__ = [
    "CAPTURE_VARIABLE",
    "ENDPOINT_VARIABLES",
    "AttributeValue",
    "Attributes",
    "Kind",
    "Span",
    "Tracing",
    "from_environment",
    "requested",
]
