"""Run one subprocess with a timeout, capped output and optional stdin; return a ``CommandResult``.

Why each piece:

- The child starts a new session (its own process group), so a timeout kills the *whole group*
  with SIGKILL: grandchildren (``sh -c 'sleep 100 & wait'``) die too and the workspace is free
  for the next command.
- stdout and stderr are drained concurrently to EOF, each kept up to ``max_output_bytes``; the
  rest is read and dropped, so a chatty child never blocks on a full pipe, and memory stays
  bounded. A truncated stream ends with a marker telling the reader how to get the rest.
- stdin is written from its own task and closed, so a child that reads little never deadlocks
  against one that writes a lot.
- With ``graceful_kill`` (the launcher of ``--isolation none``, a subreaper) the child first gets
  SIGTERM on timeout, so it can kill descendants that left its process group (``setsid``), then
  the group gets SIGKILL. Inside bubblewrap the pid namespace dies with the sandbox instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from runtime.sandbox.base import CommandResult

TIMEOUT_EXIT_CODE = -1
_READ_CHUNK = 65536
_GRACE_S = 5.0  # how long a launcher gets to clean up after SIGTERM before the group is killed


def truncation_marker(limit: int) -> str:
    return (
        f"\n[output truncated: more than {limit} bytes; "
        "redirect it to a file in the workspace and read the file in parts]"
    )


class _Capture:
    """Keeps the first ``limit`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    async def drain(self, stream: ByteReceiveStream | None) -> None:
        if stream is None:
            return
        async for chunk in stream:
            room = self.limit - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        text = bytes(self.data).decode("utf-8", errors="replace")
        return text + truncation_marker(self.limit) if self.dropped else text


async def _feed(stream: ByteSendStream | None, data: bytes | None) -> None:
    if stream is None:
        return
    try:
        if data:
            await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError):
        pass  # the child closed its stdin early: what it did not read is its business
    finally:
        await stream.aclose()


def _kill_group(process: Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: bytes | None,
    timeout_s: float,
    max_output_bytes: int,
    pass_fds: Sequence[int] = (),
    graceful_kill: bool = False,
) -> CommandResult:
    """Run ``argv`` and wait for it (or for the timeout); never raises for the child's own failures.

    ``pass_fds`` are inherited by the child and closed here once it has started."""
    started = time.monotonic()
    out, err = _Capture(max_output_bytes), _Capture(max_output_bytes)
    try:
        process = await anyio.open_process(
            list(argv),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    finally:
        for fd in pass_fds:
            os.close(fd)
    try:
        with anyio.move_on_after(timeout_s) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_feed, process.stdin, stdin)
                tg.start_soon(out.drain, process.stdout)
                tg.start_soon(err.drain, process.stderr)
            await process.wait()
        timed_out = scope.cancelled_caught
    finally:
        # Kill the group whatever happened: on timeout, and also after a normal exit, so that
        # background children (``cmd &``) do not outlive the command that started them.
        if graceful_kill and process.returncode is None:
            with suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            with anyio.CancelScope(shield=True), anyio.move_on_after(_GRACE_S):
                await process.wait()
        _kill_group(process)
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()
    exit_code = TIMEOUT_EXIT_CODE if timed_out else (process.returncode if process.returncode is not None else -1)
    return CommandResult(
        exit_code=exit_code,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        truncated=bool(out.dropped or err.dropped),
        duration_s=time.monotonic() - started,
    )
