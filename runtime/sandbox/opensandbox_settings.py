"""``OpenSandboxSettings``: how to reach an OpenSandbox server, kept apart from the SDK.

The ``opensandbox`` SDK takes a good part of a second to import; the runtime needs these settings at
start-up but the SDK only when a workspace is placed in OpenSandbox, so it is imported then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from runtime.sandbox.base import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_OUTPUT_BYTES

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True)
class OpenSandboxSettings:
    """How to reach an OpenSandbox server and what each workspace container looks like."""

    domain: str | None = None
    api_key: str | None = field(default=None, repr=False)
    protocol: str = "http"
    image: str = "python:3.11-slim"
    root_dir: str = "/workspace"
    namespace: str = "rath"
    request_timeout_s: float = 30.0
    ready_timeout_s: float = 30.0
    sandbox_timeout_s: float | None = None  # container lifetime; None keeps it until destroyed
    use_server_proxy: bool = False
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False, compare=False)
