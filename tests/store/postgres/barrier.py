"""A Unix socket a held step connects to, so a test knows the step is running and when to let it go.

The step sends one line of words (its worker's pid; or its run id and host) and waits for the test's
answer on the same stream; each arrival is (those words, the stream), open until the test answers or
ends. A path, not an address, so it reaches across network namespaces too.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from anyio.abc import ByteStream, TaskStatus


class Barrier:
    def __init__(self, path: Path, wait_s: float) -> None:
        self.path = path
        self.wait_s = wait_s  # a safety net on each arrival: it is an event, not a poll
        self.send, self.arrivals = anyio.create_memory_object_stream[tuple[list[str], ByteStream]](10)

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            async with await anyio.create_unix_listener(self.path) as listener:
                task_status.started()
                await listener.serve(self._arrived)
        finally:
            self.send.close()
            self.arrivals.close()

    async def _arrived(self, stream: ByteStream) -> None:
        async with stream:
            await self.send.send(((await stream.receive()).decode().split(), stream))
            await anyio.sleep_forever()  # the stream stays open until the test is done with it

    async def next(self) -> tuple[list[str], ByteStream]:
        with anyio.fail_after(self.wait_s):
            return await self.arrivals.receive()
