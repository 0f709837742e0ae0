"""The other process of the LISTEN/NOTIFY test: it waits for a ``ping`` and answers with a ``pong``.

    python -m tests.store.postgres.notify_peer URL

It prints ``ready`` once it listens, then, for the first ``ping`` notification, writes a row and a
``pong`` notification (carrying the ping's payload) in one transaction, and exits.
"""

from __future__ import annotations

import sys

import anyio
import asyncpg

from runtime.store.postgres import PostgresDatabase
from runtime.store.postgres.notify import Notifier, notify


async def main(url: str) -> None:
    notifier = Notifier(url)
    db = PostgresDatabase(url, max_size=1)
    await db.open()
    async with anyio.create_task_group() as tg:
        await tg.start(notifier.run)
        async with notifier.subscribe("ping") as pings:
            if notifier.server_pid is None:  # its first attempt failed: it LISTENs once it connects, and says so
                await pings.wait()
            print("ready", flush=True)
            payloads: list[str] = []
            while not payloads:  # a (re)connect marker (payload None) is nothing to answer
                payloads = [note.payload for note in await pings.wait() if note.payload is not None]

            async def answer(conn: asyncpg.Connection) -> None:
                await conn.execute("INSERT INTO answered (payload) VALUES ($1)", payloads[0])
                await notify(conn, "pong", payloads[0])

            await db.write(answer)
        notifier.close()
    await db.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
