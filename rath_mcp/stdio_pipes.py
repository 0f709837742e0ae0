"""The stdio transport's pipes, read and written on the event loop instead of through worker threads.

The SDK's stdio transport reads and writes through ``anyio.wrap_file``: every message read is a
``readline`` on a worker thread, every message written a ``write`` and then a ``flush``, each a
trip to a worker thread and back. On a small VM a trip costs 70-100 microseconds (thread
wake-ups), so three of them were about a third of a fast tool call's round trip.

Every MCP host runs a stdio server on pipes, and a pipe needs no thread:

- reading (``PipeStdin``): wait until the pipe is readable, then read what is there; a read of a
  readable pipe returns at once. The bytes become lines exactly as the SDK's text layer makes
  them (UTF-8 with bad bytes replaced; ``\\n``, ``\\r\\n`` and ``\\r`` all end a line).
- writing (``PipeStdout``): a pipe takes a write of at most ``PIPE_BUF`` bytes whole, without
  blocking, whenever ``poll`` says it is writable (POSIX makes such writes atomic; Linux and macOS
  report a pipe writable only with room for one). So a message goes out in ``PIPE_BUF`` pieces,
  each after a zero-timeout ``poll``; only what is left when the pipe is full (a host that stopped
  reading) waits on a worker thread, so the event loop never blocks on the wire.

Both ends are claimed as the SDK claims them (``rath_mcp.sdk``): the wire moves to a private
descriptor, fd 0 reads the null device and fd 1 writes to stderr, so stray output of a handler
or a child process never reaches the wire. Stdin may also be a socket; a stream that is anything
else (a terminal, a file), and Windows, is left to the SDK's own transport.
"""

from __future__ import annotations

import codecs
import io
import os
import select
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import BinaryIO, TypeVar

import anyio
import anyio.to_thread

from rath_mcp import sdk

#: Bytes one write may carry and still be taken whole by a pipe that ``poll`` reports writable.
PIPE_BUF = getattr(select, "PIPE_BUF", 512)
READ_SIZE = 65536

T = TypeVar("T")


class PipeStdin:
    """The lines of the claimed stdin, for the SDK's ``stdio_server`` (``async for line in stdin``)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._decoder = io.IncrementalNewlineDecoder(codecs.getincrementaldecoder("utf-8")("replace"), translate=True)
        self._lines: deque[str] = deque()
        self._pieces: list[str] = []  # the line being read, in the pieces that brought it
        self._eof = False

    def __aiter__(self) -> PipeStdin:
        return self

    async def __anext__(self) -> str:
        while not self._lines:
            if self._eof:
                raise StopAsyncIteration
            await anyio.wait_readable(self._fd)
            data = os.read(self._fd, READ_SIZE)
            self._take(self._decoder.decode(data, final=not data))
            if not data:
                self._eof = True
                if last := "".join(self._pieces):  # the last line, without a newline
                    self._lines.append(last)
        return self._lines.popleft()

    def _take(self, text: str) -> None:
        if "\n" not in text:  # a long line arrives in many reads: joined once, when it ends
            self._pieces.append(text)
            return
        first, *complete, rest = text.split("\n")
        self._lines.append("".join([*self._pieces, first, "\n"]))
        self._lines.extend(line + "\n" for line in complete)
        self._pieces = [rest] if rest else []


class PipeStdout:
    """What the SDK's ``stdio_server`` writes messages to (``write``, then ``flush``): the claimed stdout pipe."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending: list[str] = []
        self._poll = select.poll()
        self._poll.register(fd, select.POLLOUT)

    async def write(self, text: str) -> int:
        self._pending.append(text)
        return len(text)

    async def flush(self) -> None:
        data = "".join(self._pending).encode("utf-8")  # strict, as the SDK's text layer encodes
        self._pending.clear()
        view, sent = memoryview(data), 0
        while sent < len(data) and self._poll.poll(0):  # room (or a closed reader: the write then raises)
            sent += os.write(self._fd, view[sent : sent + PIPE_BUF])
        if sent < len(data):  # the pipe is full: wait for the host to read on a thread, not on the loop
            await anyio.to_thread.run_sync(_write_all, self._fd, view[sent:])


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _pipe_fd(stream: BinaryIO, *, socket: bool) -> int | None:
    """The descriptor of a stream when it is a pipe (or, with ``socket``, a socket: the loop can wait to
    read one too, but the rule that makes a small write never block is a pipe's)."""
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return None
    return fd if stat.S_ISFIFO(mode) or (socket and stat.S_ISSOCK(mode)) else None


@asynccontextmanager
async def pipes() -> AsyncIterator[tuple[PipeStdin | None, PipeStdout | None]]:
    """The process's stdin and stdout claimed and served on the loop where they are pipes; ``None`` for
    a stream left to the SDK (which then claims it itself)."""
    if sys.platform == "win32" or not hasattr(select, "poll"):
        yield None, None
        return
    async with AsyncExitStack() as stack:
        stdin = _claimed(stack, sys.stdin, sdk.claim_stdin, PipeStdin, socket=True)
        stdout = _claimed(stack, sys.stdout, sdk.claim_stdout, PipeStdout, socket=False)
        yield stdin, stdout


def _claimed(
    stack: AsyncExitStack,
    stream: object,
    claim: Callable[[], tuple[BinaryIO, Callable[[], None] | None]],
    serve: Callable[[int], T],
    *,
    socket: bool,
) -> T | None:
    buffer = getattr(stream, "buffer", None)
    if buffer is None or _pipe_fd(buffer, socket=socket) is None:
        return None
    wire, release = claim()
    if release is not None:
        stack.callback(release)
    fd = _pipe_fd(wire, socket=socket)
    return serve(fd) if fd is not None else None
