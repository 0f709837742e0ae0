"""A process that keeps writing sessions to a store (``python -m tests.cli.writer HOME``) until its stdin closes.

It prints the number written after each commit, so a test knows that writes happen before, during
and after whatever it does meanwhile (a backup).
"""

from __future__ import annotations

import sys
import threading

import anyio

from runtime import Runtime


async def write_until_stdin_closes(home: str) -> None:
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    async with Runtime.open(home, workers=0) as rt:
        written = 0
        while not stop.is_set():
            await rt.sessions.create([{"kind": "user", "content": f"write {written} " + "x" * 2000}])
            written += 1
            print(written, flush=True)


if __name__ == "__main__":
    anyio.run(write_until_stdin_closes, sys.argv[1])
