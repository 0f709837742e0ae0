"""A worker process for the crash test: ``python -m tests.flow.crash_worker HOME``.

Serves durable runs on HOME (one slot, hour-long leases) with the provider the environment configures
(``RATH_PROVIDER``/``RATH_SCRIPT``); prints "ready" once serving, then runs until it is killed.
"""

from __future__ import annotations

import sys

import anyio

from runtime import Runtime


async def serve(home: str) -> None:
    async with Runtime.open(home, workers=1, lease_s=3600.0):
        print("ready", flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(serve, sys.argv[1])
