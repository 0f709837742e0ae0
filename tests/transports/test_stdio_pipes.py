"""The stdio pipes served on the event loop read and write exactly what the SDK's text layer would.

Real OS pipes: lines read by ``PipeStdin`` are compared with what a ``TextIOWrapper`` (the SDK's
reader) makes of the same bytes, fed in awkward pieces; ``PipeStdout`` writes a message far larger
than a pipe holds while another thread reads it, so the part that finds the pipe full goes through
the worker-thread path.
"""

from __future__ import annotations

import io
import os
import threading

import anyio
import pytest

from rath_mcp.stdio_pipes import PIPE_BUF, PipeStdin, PipeStdout

pytestmark = pytest.mark.anyio

#: Line ends of every spelling, a multibyte character and a bad UTF-8 byte, and no final newline.
AWKWARD = (
    b'{"a": 1}\n{"b": "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"}\r\n{"c": 3}\r{"d": "\xff\xfe bad"}\n\n'
    + b'{"long": "'
    + b"x" * 200_000
    + b'"}\r\n{"last": true}'
)


def sdk_lines(data: bytes) -> list[str]:
    """The lines the SDK's stdio reader gets from ``data`` (UTF-8, bad bytes replaced, universal newlines)."""
    return list(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace"))


async def read_lines(pieces: list[bytes]) -> list[str]:
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with os.fdopen(write_fd, "wb", buffering=0) as pipe:
            for piece in pieces:
                pipe.write(piece)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        return [line async for line in PipeStdin(read_fd)]
    finally:
        feeder.join()
        os.close(read_fd)


@pytest.mark.parametrize("size", [1, 2, 7, 4096, len(AWKWARD)])
async def test_stdin_lines_are_the_sdk_text_layers_lines(size: int) -> None:
    pieces = [AWKWARD[i : i + size] for i in range(0, len(AWKWARD), size)]
    assert await read_lines(pieces) == sdk_lines(AWKWARD)


async def test_stdin_ends_at_end_of_file_with_nothing_left() -> None:
    assert await read_lines([]) == []
    assert await read_lines([b"one\n", b"two\r"]) == sdk_lines(b"one\ntwo\r") == ["one\n", "two\n"]


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
            await stdout.write(message)
            await stdout.flush()
    finally:
        os.close(write_fd)
        await anyio.to_thread.run_sync(reader.join)
    assert bytes(received) == "".join(messages).encode("utf-8")


async def test_stdout_refuses_text_the_sdk_refuses_to_encode() -> None:
    read_fd, write_fd = os.pipe()
    try:
        stdout = PipeStdout(write_fd)
        await stdout.write('{"bad": "\ud800"}\n')
        with pytest.raises(UnicodeEncodeError):
            await stdout.flush()
    finally:
        os.close(read_fd)
        os.close(write_fd)
