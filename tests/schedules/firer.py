"""A process that fires schedules on an injected clock: what ``serve``'s ticker does, driven line by line.

    python -m tests.schedules.firer HOME STORE_URL

It opens the runtime as ``serve`` does (no worker loop: ``workers=0``), points its ticker's clock at the
time each stdin line gives (UNIX seconds), fires what is due at it and prints the run ids it made as
one JSON line on stdout. Its own ticker loop runs on the same clock, so it may fire too: a second firer
inside the process. It prints ``ready`` once open, and ends when stdin closes.
"""

from __future__ import annotations

import json
import sys

import anyio

from runtime import Runtime


class Clock:
    def __init__(self) -> None:
        self.at = 0.0

    def __call__(self) -> float:
        return self.at


async def main(home: str, store: str) -> None:
    clock = Clock()
    async with Runtime.open(home, store=store, workers=0) as rt:
        rt.ticker.clock = clock
        print("ready", flush=True)
        while line := await anyio.to_thread.run_sync(sys.stdin.readline):
            clock.at = float(line)
            print(json.dumps(await rt.ticker.fire_due()), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
