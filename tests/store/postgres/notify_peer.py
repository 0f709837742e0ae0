"""The other process of the LISTEN/NOTIFY test: it waits for a ``ping`` and answers with a ``pong``.

    python -m tests.store.postgres.notify_peer URL

It prints ``ready`` once it listens, then, for the first ``ping`` notification, writes a row and a
``pong`` notification (carrying the ping's payload) in one transaction, and exits.
"""

from __future__ import annotations

import sys

import anyio
import asyncpg

from runtime.store.postgres import Notifier, PostgresDatabase, notify


async def main(url: str) -> None:
    notifier = Notifier(url)
    db = PostgresDatabase(url, max_size=1)
    await db.open()
    async with anyio.create_task_group() as tg:
        await tg.start(notifier.run)
        async with notifier.subscribe("ping") as pings:
            if not notifier.connected:  # its first attempt failed: it LISTENs once it connects, and says so
                await pings.__anext__()
            print("ready", flush=True)
            async for note in pings:
                if note.payload is None:
                    continue  # a (re)connect marker: nothing to answer
                payload = note.payload

                async def answer(conn: asyncpg.Connection, payload: str = payload) -> None:
                    await conn.execute("INSERT INTO answered (payload) VALUES ($1)", payload)
                    await notify(conn, "pong", payload)

                await db.write(answer)
                break
        notifier.close()
    await db.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
