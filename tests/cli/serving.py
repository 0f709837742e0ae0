"""``rath-mcp`` commands that keep running (``serve --transport http``, ``worker``) as real subprocesses.

The process's stderr is read line by line for as long as it runs (so it never fills its pipe); a
test waits for the line it needs (an ``anyio.Event`` set by the reader, bounded by ``fail_after``),
never for a length of time. The process is always stopped with SIGTERM (then SIGKILL) at the end.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

WAIT_S = 60.0  # a bound on how long a process may take to say something, never a measurement


@dataclass
class Running:
    """A running ``rath-mcp`` process and the stderr lines it printed so far."""

    process: Process
    lines: list[str] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)
    ended: bool = False

    async def line_with(self, pattern: str) -> re.Match[str]:
        """The first stderr line matching ``pattern`` (waiting for it); fails if the process ends first."""
        with anyio.fail_after(WAIT_S):
            while True:
                for line in self.lines:
                    if found := re.search(pattern, line):
                        return found
                if self.ended:
                    raise AssertionError(f"rath-mcp ended without printing {pattern!r}:\n" + "\n".join(self.lines))
                await self.changed.wait()

    async def url(self, path: str) -> str:
        """The ``http://HOST:PORT{path}`` URL the process announced."""
        return (await self.line_with(rf"(http://\S+?{re.escape(path)})(\s|$)")).group(1)

    async def _read(self) -> None:
        assert self.process.stderr is not None
        reader = BufferedByteReceiveStream(self.process.stderr)
        try:
            while True:
                line = await reader.receive_until(b"\n", 1 << 20)
                self.lines.append(line.decode(errors="replace"))
                self._wake()
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
            pass
        self.ended = True
        self._wake()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


def rath_argv(*argv: str) -> list[str]:
    """``rath-mcp ARGV`` as this interpreter runs it."""
    return [sys.executable, "-m", "rath_mcp", *argv]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RATH_HOME", "RATH_STORE")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


@asynccontextmanager
async def running(
    argv: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> AsyncIterator[Running]:
    """``argv`` (a full command line) running for the life of the block, its stderr read as it comes
    (``env``: variables set for it beside the clean environment)."""
    process = await anyio.open_process(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=clean_env(**(env or {})),
        cwd=cwd,
    )
    found = Running(process)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(found._read)
            try:
                yield found
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(process)
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await process.aclose()  # its pipes too: an unclosed one is a ResourceWarning, an error in tests


async def _stop(process: Process) -> None:
    """SIGTERM, and SIGKILL if it has not ended 10 s later."""
    if process.returncode is None:
        process.terminate()
        with anyio.move_on_after(10):
            await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()
