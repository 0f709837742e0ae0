"""The export process (``runtime/telemetry/export_process.py``): a traced process's spans are encoded and sent
by a child of its own, which ends with it and never outlives it.

Each test points a real ``OtelTracing.from_environment`` at the local OTLP receiver; the export process is
the real one (``python -m runtime.telemetry.export_process``). A process's end is waited for with a pidfd
(it is readable once the process has exited, whoever its parent is), never by sleeping.
"""

from __future__ import annotations

import enum
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.telemetry import otel
from runtime.telemetry.otel import OtelTracing
from tests.otel_receiver import WAIT_S, Receiver, receiving, trace_env

#: The traced process of the crash test: one span handed to its export process, its pid printed, then a wait.
PARENT = """
from runtime.telemetry import from_environment
tracing = from_environment()
with tracing.span("before the crash", kind="server"):
    pass
tracing._outbox.stop(30)  # the record is in the pipe (the outbox has no flush of its own: shutdown is the flush)
print(tracing.export_pid, flush=True)
input()
"""

#: A traced process that ends without a stop of its own: its last span goes out all the same.
EXITING = """
from runtime.telemetry import from_environment
tracing = from_environment()
with tracing.span("at the exit", kind="server"):
    pass
print(tracing.export_pid, flush=True)
"""


class Colour(enum.StrEnum):
    RED = "red"


class Size(enum.IntEnum):
    LARGE = 3


def environment(url: str, **extra: str) -> dict[str, str]:
    plain = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    return {**plain, **trace_env(url, **extra)}


def exited(pid: int) -> bool:
    """Whether process ``pid`` exits within the safety net (``True`` also when it is gone already)."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([handle], [], [], WAIT_S)
        return bool(readable)
    finally:
        os.close(handle)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


def test_a_stop_sends_every_span_through_the_export_process_and_waits_for_it(receiver: Receiver) -> None:
    tracing = OtelTracing.from_environment(environment(receiver.url, OTEL_BSP_SCHEDULE_DELAY="60000"))
    with tracing.span("request", kind="server", attributes={"colour": Colour.RED, "size": Size.LARGE}) as span:
        span.event("noted", {"sizes": [Size.LARGE, 1]})
        span.set("plain", "value")
    pid = tracing.export_pid
    assert pid is not None
    tracing.shutdown()  # the processor would hold the span for a minute: only the stop's flush sends it
    assert not Path(f"/proc/{pid}").exists()  # exited and reaped
    (found,) = receiver.spans
    assert found.name == "request" and found.kind == "server"
    assert found.attributes == {"colour": "red", "size": 3, "plain": "value"}  # enums sent as their values
    assert found.event_attributes == [{"sizes": [3, 1]}]
    assert found.resource["service.name"] == "rath-mcp"


def test_the_export_process_sends_what_it_holds_and_exits_when_its_parent_is_killed(receiver: Receiver) -> None:
    env = environment(receiver.url, OTEL_BSP_SCHEDULE_DELAY="60000")
    argv = [sys.executable, "-c", PARENT]
    with subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as parent:
        try:
            assert parent.stdout is not None
            pid = int(parent.stdout.readline())
        finally:
            parent.send_signal(signal.SIGKILL)  # no stop of its own: the pipe's end is all the export process sees
    assert exited(pid)
    assert receiver.named("before the crash").kind == "server"  # sent at the end of the pipe, not on a timer


def test_a_hung_collector_holds_a_stop_only_until_the_bound_and_leaves_no_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(otel, "SHUTDOWN_WAIT_S", 0.5)  # the parent's bound (the export process's own is longer)
    with receiving(hang=True) as stuck:
        tracing = OtelTracing.from_environment(environment(stuck.url))
        with tracing.span("held"):
            pass
        pid = tracing.export_pid
        assert pid is not None and stuck.held.wait(WAIT_S)  # the export process is in a request that hangs
        tracing.shutdown()
        assert not Path(f"/proc/{pid}").exists()  # killed at the bound and reaped


def test_a_process_ending_without_a_stop_still_sends_its_last_spans(receiver: Receiver) -> None:
    env = environment(receiver.url, OTEL_BSP_SCHEDULE_DELAY="60000")
    done = subprocess.run([sys.executable, "-c", EXITING], env=env, capture_output=True, text=True, check=True)
    assert exited(int(done.stdout))  # waited for at the exit already
    assert receiver.named("at the exit").kind == "server"


def test_when_the_export_process_cannot_start_traced_code_runs_on_untraced(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))  # what the export process is started with
    tracing = OtelTracing.from_environment(environment(receiver.url))
    with tracing.span("unsent", kind="server") as span:
        span.set("kept", "nowhere")
        assert tracing.ids() is not None  # spans are still made, and current: only their export is gone
    tracing.shutdown()
    assert tracing.export_pid is None and "could not start" in caplog.text
    assert receiver.spans == []
