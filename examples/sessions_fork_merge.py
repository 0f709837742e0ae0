"""Sessions: create, fork, merge and lineage through the Python runtime API.

A session is an immutable snapshot (like a commit): every change yields a new id, forks share
their parent's chunks without copying them, and a merge keeps the shared history once and then
each branch's own chunks in argument order.

Run it:  python examples/sessions_fork_merge.py      (state goes to $RATH_HOME, else ~/.rath)
"""

from __future__ import annotations

import anyio

from runtime import Runtime


async def main() -> None:
    async with Runtime.open() as rt:
        root = await rt.sessions.create(
            [
                {"kind": "system", "content": "You are a careful planner."},
                {"kind": "user", "content": "Plan a picnic."},
            ]
        )
        print(f"created {root.id} with {root.length} chunks")

        left, right = await rt.sessions.fork(root.id, count=2)
        left = await rt.sessions.append(left.id, [{"kind": "assistant", "content": "Option A: the park."}])
        right = await rt.sessions.append(right.id, [{"kind": "assistant", "content": "Option B: the beach."}])
        print(f"forked into {left.id} and {right.id}")

        merged = await rt.sessions.merge([left.id, right.id])
        session = await rt.sessions.get(merged.id)
        print(f"merged into {merged.id} ({merged.op}, parents {', '.join(merged.parents)})")
        for chunk in session.chunks:
            print(f"  {chunk.kind:>9}: {chunk.content}")

        graph = await rt.sessions.lineage(merged.id)
        print(f"lineage: {len(graph.nodes)} nodes, {len(graph.edges)} edges")
        print(graph.mermaid())


if __name__ == "__main__":
    anyio.run(main)
