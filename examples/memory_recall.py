"""Memory: remember facts, recall them by meaning-bearing words, commit a session into memory.

Recall is BM25 ranking over SQLite FTS5: only items that share a word with the query come back,
best first, each with a score above zero. Memory is persistent and shared by every agent and
process that opens the same home.

Run it:  python examples/memory_recall.py      (state goes to $RATH_HOME, else ~/.rath)
"""

from __future__ import annotations

import anyio

from runtime import Runtime


async def main() -> None:
    async with Runtime.open() as rt:
        await rt.memory.remember("The user prefers short answers with code first.", tags=["style"])
        await rt.memory.remember("The staging database is PostgreSQL 16 on port 5433.", scope="resources")
        await rt.memory.remember("Deploys happen on Tuesdays after the team sync.", scope="agent", path="ops/deploys")

        for query in ["which database does staging use", "when are deploys", "favourite colour"]:
            hits = await rt.memory.recall(query, k=2)
            print(f"recall {query!r}: {len(hits)} hit(s)")
            for hit in hits:
                print(f"  {hit.score:.3f}  {hit.uri}  {hit.snippet}")

        session = await rt.sessions.create(
            [
                {"kind": "user", "content": "Remember that I prefer tabs over spaces."},
                {"kind": "assistant", "content": "Noted: you prefer tabs over spaces."},
            ]
        )
        committed = await rt.memory.commit(session.id)
        print(f"committed {session.id}: transcript at {committed.archived_uri}, {committed.extracted_count} extracted")
        hits = await rt.memory.recall("tabs or spaces", k=1)
        print(f"after commit, 'tabs or spaces' finds {hits[0].uri if hits else 'nothing'}")


if __name__ == "__main__":
    anyio.run(main)
