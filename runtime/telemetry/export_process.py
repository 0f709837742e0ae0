"""The export process: the SDK's batch processor and OTLP/HTTP exporter in a child of the traced process.

An OpenTelemetry collector or agent is usually a process of its own; this is a small one, private to
the ``serve`` or ``worker`` process that starts it (``ExportProcess``, made by ``OtelTracing``). Encoding
spans as protobuf and sending them is the bulk of what tracing costs in CPU (``docs/traces.md``); in the
traced process it held the interpreter lock that the requests and steps being traced need, so each
span slowed them. Here it runs on another core, and the traced process only writes its ended spans'
records (``span_export.py``) to a pipe: a batch at a time, ``marshal``-ed, length-prefixed, written
by its outbox's thread.

The child is ``python -m runtime.telemetry.export_process`` with the parent's environment, so every
``OTEL_*`` variable is read here as it was in the parent (the exporter's endpoint, headers, timeout,
compression, certificates; ``OTEL_BSP_*``; the span limits). The resource and scope are the parent's,
sent as the first frame. The child reads the pipe all the time (the processor's queue drops what does
not fit; a hung collector holds only the processor's thread), so a write never waits for a collector.

It lives as long as the pipe: at end of file (the parent's ``shutdown``, or the parent's end however
it came, the kernel closing its end) it exports what it holds, for at most ``SHUTDOWN_WAIT_S``, and
exits. It runs in a session of its own so a Ctrl-C meant for the parent does not cut its last
export short; the parent's ``shutdown`` waits for it and kills it past the same bound.
"""

from __future__ import annotations

import logging
import marshal
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from runtime.telemetry.span_export import Exporting, Record

log = logging.getLogger(__name__)

#: The longest a stop waits for the last spans to be sent; past it they are dropped (a hung collector).
SHUTDOWN_WAIT_S = 5.0
_HELLO = "rath-otel-export/1"
_LENGTH = 4  # bytes of each frame's big-endian length


class ExportProcess:
    """The parent's handle on its export process: started at once, fed batches of records, stopped once."""

    def __init__(self, resource: Resource, scope: InstrumentationScope, environ: Mapping[str, str]) -> None:
        argv = [sys.executable, "-m", "runtime.telemetry.export_process"]
        self._process: subprocess.Popen[bytes] | None = None
        self._ended = True
        try:
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,  # (stdout may be the MCP channel of a stdio server)
                env=dict(environ),
                start_new_session=True,
            )
        except OSError as error:  # (no process to spare): traced code runs on, its spans go nowhere
            log.warning("the span export process could not start (%s): spans are not exported", error)
            return
        assert self._process.stdin is not None
        self._pipe: IO[bytes] = self._process.stdin
        self._ended = False
        hello = (_HELLO, dict(resource.attributes), resource.schema_url, scope.name, scope.version)
        self._write(marshal.dumps(hello))

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def send(self, records: list[Record]) -> None:
        """Write one batch (from the outbox's thread only); blocks only while the child's pipe is full."""
        try:
            body = marshal.dumps(records)
        except ValueError:  # a value of a subclass (an enum's): as plain values, as the encoder would send them
            body = marshal.dumps([_plain_record(record) for record in records])
        self._write(body)

    def stop(self, handed_over: bool, deadline: float) -> None:
        """Close the pipe (the child exports what it has and exits) and wait for it until ``deadline``
        (``time.monotonic``); kill it past that, or at once when the outbox could not hand over its last batch
        (a write stuck on a full pipe: the kill ends it)."""
        if self._process is None:
            return
        if handed_over:
            try:
                self._pipe.close()
            except OSError:
                pass  # the child has already gone: nothing was lost that closing would have saved
            try:
                self._process.wait(max(0.0, deadline - time.monotonic()))
                return
            except subprocess.TimeoutExpired:
                pass
        self._process.kill()
        self._process.wait()
        try:
            self._pipe.close()
        except (OSError, ValueError):
            pass  # a write cut short by the kill: nothing is left to send

    def _write(self, body: bytes) -> None:
        if self._ended:
            return
        try:
            self._pipe.write(len(body).to_bytes(_LENGTH, "big") + body)
            self._pipe.flush()
        except (OSError, ValueError):  # the child ended (a crash, a kill); ValueError: the pipe is closed
            self._ended = True
            status = self._process.poll() if self._process else None
            log.warning("the span export process ended (exit status %s): spans are not exported", status)


def _plain_record(record: Record) -> Record:
    attributes, events = record[7], record[8]
    plain_events = tuple((name, _plain_map(found), at) for name, found, at in events)
    return (*record[:7], _plain_map(attributes), plain_events, *record[9:])


def _plain_map(attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if attributes is None:
        return None
    found = {}
    for key, value in attributes.items():
        plain = _plain(value)
        if plain is None:
            log.error("span attribute %s not exported: a %s is no attribute value", key, type(value).__name__)
        else:
            found[str.__str__(key)] = plain
    return found


def _plain(value: Any) -> Any:
    # bool before int (a bool is an int), str and bytes before sequences
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, Sequence):
        items = [_plain(item) for item in value]
        return None if None in items else tuple(items)
    return None


def _read(stream: IO[bytes]) -> Any:
    """The next frame's value; ``None`` at end of file (a frame cut short by it too)."""
    head = stream.read(_LENGTH)
    if len(head) < _LENGTH:
        return None
    size = int.from_bytes(head, "big")
    body = stream.read(size)
    return marshal.loads(body) if len(body) == size else None


def _serve(stream: IO[bytes]) -> None:
    """Export what arrives until end of file, then what is left, for at most ``SHUTDOWN_WAIT_S``."""
    from runtime.telemetry.otlp import OtlpSpanExporter  # the child's import only: the parent never sends

    hello = _read(stream)
    if not hello or hello[0] != _HELLO:
        log.error("not a span export stream: exiting")
        return
    _, attributes, schema_url, scope_name, scope_version = hello
    exporting = Exporting(
        OtlpSpanExporter(), Resource(attributes, schema_url), InstrumentationScope(scope_name, scope_version)
    )
    try:
        while (records := _read(stream)) is not None:
            exporting.take(records)
    finally:
        exporting.shutdown(SHUTDOWN_WAIT_S)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="rath-mcp traces: %(levelname)s %(name)s: %(message)s")
    try:
        _serve(sys.stdin.buffer)
    finally:
        sys.stderr.flush()
        os._exit(0)  # not waiting for an export still hung on a collector: past the bound its spans are dropped


if __name__ == "__main__":
    main()
