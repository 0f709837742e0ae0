"""The stdio pipes served on the event loop read and write exactly what the SDK's text layer would.

Real OS pipes: frames cut by ``FrameReader`` are compared with the lines a ``TextIOWrapper`` (the
SDK's reader) makes of the same bytes, fed in awkward pieces; a line over the limit comes out as
its size, head and tail, and the lines around it as usual. ``PipeStdout`` writes a message far
larger than a pipe holds while another thread reads it, so the part that finds the pipe full goes
through the worker-thread path.
"""

from __future__ import annotations

import io
import os
import threading

import anyio
import pytest

from rath_mcp.stdio_pipes import KEPT_ENDS, PIPE_BUF, FrameReader, PipeStdout, _reader
from rath_mcp.wire import Oversized

pytestmark = pytest.mark.anyio

#: Line ends of every spelling, a multibyte character and a bad UTF-8 byte, and no final newline.
AWKWARD = (
    b'{"a": 1}\n{"b": "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"}\r\n{"c": 3}\r{"d": "\xff\xfe bad"}\n\n'
    + b'{"long": "'
    + b"x" * 200_000
    + b'"}\r\n{"last": true}'
)


def sdk_lines(data: bytes) -> list[str]:
    """The lines the SDK's stdio reader gets from ``data`` (UTF-8, bad bytes replaced, universal newlines),
    without their line ends."""
    return [line.removesuffix("\n") for line in io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace")]


async def read_lines(pieces: list[bytes], limit: int = 10_000_000) -> list[str | Oversized]:
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with os.fdopen(write_fd, "wb", buffering=0) as pipe:
            for piece in pieces:
                pipe.write(piece)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        with os.fdopen(read_fd, "rb", buffering=0, closefd=False) as stream:
            return [frame async for frame in FrameReader(_reader(stream), limit)]
    finally:
        feeder.join()
        os.close(read_fd)


@pytest.mark.parametrize("size", [1, 2, 7, 4096, len(AWKWARD)])
async def test_stdin_lines_are_the_sdk_text_layers_lines(size: int) -> None:
    pieces = [AWKWARD[i : i + size] for i in range(0, len(AWKWARD), size)]
    assert await read_lines(pieces) == sdk_lines(AWKWARD)


async def test_stdin_ends_at_end_of_file_with_nothing_left() -> None:
    assert await read_lines([]) == []
    assert await read_lines([b"one\n", b"two\r"]) == sdk_lines(b"one\ntwo\r") == ["one", "two"]


@pytest.mark.parametrize("size", [1, 4096, 65536])
async def test_a_line_over_the_limit_is_its_size_head_and_tail_and_the_next_line_reads_as_usual(size: int) -> None:
    long_line = b"<" + b"m" * 300_000 + b">"
    data = b"before\r\n" + long_line + b"\r\nafter\n" + b"a" * 1000 + b"\n"
    pieces = [data[i : i + size] for i in range(0, len(data), size)]
    before, over, after, fits = await read_lines(pieces, limit=1000)
    assert (before, after, fits) == ("before", "after", "a" * 1000)
    assert isinstance(over, Oversized) and over.size == len(long_line)
    assert over.head == "<" + "m" * (KEPT_ENDS - 1), "the head is the line's first bytes"
    assert over.tail == "m" * (KEPT_ENDS - 1) + ">", "the tail is the line's last bytes"


async def test_stdout_writes_a_message_larger_than_the_pipe_whole_and_in_order() -> None:
    read_fd, write_fd = os.pipe()
    received = bytearray()

    def drain() -> None:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(PIPE_BUF):
                received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    messages = ['{"n": 1, "text": "é€😀"}\n', '{"big": "' + "y" * 3_000_000 + '"}\n', '{"n": 3}\n']
    try:
        stdout = PipeStdout(write_fd)
        for message in messages:
            await stdout.send(message.encode())
    finally:
        os.close(write_fd)
        await anyio.to_thread.run_sync(reader.join)
    assert bytes(received) == "".join(messages).encode("utf-8")
