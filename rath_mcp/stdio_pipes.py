"""The stdio transport: frames read bounded and judged (``rath_mcp.wire``), pipes served on the event loop.

The SDK's ``stdio_server`` reads whole lines of any length and hands each to its parser, which
drops what it cannot read unanswered; it reads and writes through ``anyio.wrap_file``, a trip to a
worker thread and back for every message read and two for every message written (70-100
microseconds each on a small VM, a third of a fast tool call's round trip). Here:

- frames (``FrameReader``): the wire's bytes are cut into lines (``\\n``, ``\\r\\n`` and ``\\r`` end
  one, as the SDK's text layer cuts them; UTF-8 with bad bytes replaced, as it decodes them). A
  line over the limit is never held: only its head and tail are kept, to find its id, and it is
  answered as too large while the next line is read as usual.
- every frame passes ``wire.screen``: a message goes to the server, anything else is answered
  with its JSON-RPC error on the same output, in turn with the server's own messages.
- reading a pipe (or socket) waits until it is readable, then reads what is there; a read of a
  readable pipe returns at once. Another stream (a file, a terminal) is read on a worker thread.
- writing a pipe (``PipeStdout``): a pipe takes a write of at most ``PIPE_BUF`` bytes whole,
  without blocking, whenever ``poll`` says it is writable (POSIX makes such writes atomic; Linux and
  macOS report a pipe writable only with room for one). A message goes out in ``PIPE_BUF``
  pieces, each after a zero-timeout ``poll``; only what is left when the pipe is full (a host that
  stopped reading) waits on a worker thread, so the loop never blocks on the wire.

Both ends are claimed as the SDK claims them (``rath_mcp.sdk``): the wire moves to a private
descriptor, fd 0 reads the null device and fd 1 writes to stderr, so stray output of a handler
or a child process never reaches the wire.
"""

from __future__ import annotations

import os
import select
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError

from rath_mcp import sdk, wire
from rath_mcp.wire import Oversized

#: Bytes one write may carry and still be taken whole by a pipe that ``poll`` reports writable.
PIPE_BUF = getattr(select, "PIPE_BUF", 512)
READ_SIZE = 65536
#: Bytes kept of each end of a frame over the limit (ids sit at one end or the other).
KEPT_ENDS = 65536

Read = Callable[[], Awaitable[bytes]]


class FrameReader:
    """The frames of a byte stream, one a line, each a ``str`` or an :class:`Oversized` beyond ``limit`` bytes."""

    def __init__(self, read: Read, limit: int) -> None:
        self._read = read
        self._limit = limit
        self._pieces: list[bytes] | None = []  # the line being read, in the pieces that brought it (None: too long)
        self._size = 0  # its bytes so far
        self._head = self._tail = b""  # its first and latest bytes, once it is over the limit
        self._after_cr = False  # the last read ended with \r: a \n starting the next one ends nothing
        self._frames: deque[str | Oversized] = deque()
        self._eof = False

    def __aiter__(self) -> FrameReader:
        return self

    async def __anext__(self) -> str | Oversized:
        while not self._frames:
            if self._eof:
                raise StopAsyncIteration
            data = await self._read()
            if data:
                self._take(data)
                continue
            self._eof = True
            if self._size:  # the last line, without a line end
                self._end_line(b"")
        return self._frames.popleft()

    def _take(self, data: bytes) -> None:
        if self._after_cr and data.startswith(b"\n"):
            data = data[1:]
        self._after_cr = data.endswith(b"\r")
        if b"\r" in data:  # rare: line ends of other systems become \n (bytes 13 and 10 never occur inside UTF-8)
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in data:
            self._add(data)
            return
        first, *complete, rest = data.split(b"\n")
        self._end_line(first)
        for line in complete:
            self._end_line(line)
        if rest:
            self._add(rest)

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._pieces is not None and self._size <= self._limit:
            self._pieces.append(piece)
            return
        if self._pieces is not None:  # just went over: from now on only the line's ends are kept
            piece, self._pieces = b"".join([*self._pieces, piece]), None
        if len(self._head) < KEPT_ENDS:
            self._head += piece[: KEPT_ENDS - len(self._head)]
        self._tail = (self._tail + piece)[-KEPT_ENDS:]

    def _end_line(self, last: bytes) -> None:
        self._add(last)
        if self._pieces is None:
            self._frames.append(Oversized(self._size, _text(self._head), _text(self._tail)))
        else:
            self._frames.append(_text(b"".join(self._pieces)))
        self._pieces, self._size, self._head, self._tail = [], 0, b"", b""


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


class PipeStdout:
    """The claimed stdout pipe: each message written whole, in ``PIPE_BUF`` pieces while the pipe has room."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._poll = select.poll()
        self._poll.register(fd, select.POLLOUT)

    async def send(self, data: bytes) -> None:
        view, sent = memoryview(data), 0
        while sent < len(data) and self._poll.poll(0):  # room (or a closed reader: the write then raises)
            sent += os.write(self._fd, view[sent : sent + PIPE_BUF])
        if sent < len(data):  # the pipe is full: wait for the host to read on a thread, not on the loop
            await anyio.to_thread.run_sync(_write_all, self._fd, view[sent:])


class ThreadStdout:
    """A claimed stdout that is not a pipe (a file, a terminal): written on a worker thread."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    async def send(self, data: bytes) -> None:
        await anyio.to_thread.run_sync(self._write, data)

    def _write(self, data: bytes) -> None:
        self._stream.write(data)
        self._stream.flush()


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


@asynccontextmanager
async def stdio_streams(limit: int = wire.MAX_FRAME_BYTES) -> AsyncIterator[tuple[Any, Any]]:
    """The server's read and write streams over the process's stdin and stdout (claimed while open)."""
    async with AsyncExitStack() as stack:
        read = _reader(_claim(stack, sdk.claim_stdin))
        stdout = _claim(stack, sdk.claim_stdout)
        out_fd = _fd(stdout, socket=False)
        sink = PipeStdout(out_fd) if out_fd is not None and hasattr(select, "poll") else ThreadStdout(stdout)
        to_server, read_stream = sdk.context_streams()
        write_stream, from_server = sdk.context_streams()

        async def read_frames() -> None:
            async with to_server:
                async for frame in FrameReader(read, limit):
                    verdict = wire.oversized(frame, limit) if isinstance(frame, Oversized) else wire.screen(frame)
                    if verdict is None:
                        continue
                    if isinstance(verdict, JSONRPCError | wire.BatchReply):
                        await write_stream.send(SessionMessage(verdict))  # type: ignore[arg-type]
                    else:
                        await to_server.send(SessionMessage(verdict))

        async def write_messages() -> None:
            async with from_server:
                async for message in from_server:
                    await sink.send(wire.encode(message.message))

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_frames)
            tg.start_soon(write_messages)
            yield read_stream, write_stream


def _claim(stack: AsyncExitStack, claim: Callable[[], tuple[BinaryIO, Callable[[], None] | None]]) -> BinaryIO:
    wire_stream, release = claim()
    if release is not None:
        stack.callback(release)
    return wire_stream


def _reader(stdin: BinaryIO) -> Read:
    """How to read the claimed stdin: on the loop when it is a pipe or socket, else on a worker thread."""
    fd = _fd(stdin, socket=True)
    if fd is not None and sys.platform != "win32":

        async def read_ready() -> bytes:
            await anyio.wait_readable(fd)
            return os.read(fd, READ_SIZE)

        return read_ready

    async def read_blocking() -> bytes:
        return await anyio.to_thread.run_sync(_read1, stdin, abandon_on_cancel=True)

    return read_blocking


def _read1(stdin: BinaryIO) -> bytes:
    read1 = getattr(stdin, "read1", None)
    return bytes(read1(READ_SIZE) if read1 is not None else stdin.read(READ_SIZE))


def _fd(stream: BinaryIO, *, socket: bool) -> int | None:
    """The descriptor of a stream when it is a pipe (or, with ``socket``, a socket: the loop can wait to
    read one too, but the rule that makes a small write never block is a pipe's)."""
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return None
    return fd if stat.S_ISFIFO(mode) or (socket and stat.S_ISSOCK(mode)) else None
