"""The lineage walk shared by every session store: a breadth-first search over parent edges.

Bounded twice: by ``depth`` (steps from the focus session) and by ``max_nodes``, because a session
with thousands of forks would otherwise turn one lineage call into thousands of queries and a
Mermaid text no one can read. A walk cut short says so (``truncated``); its edges only join the
nodes it returns. A store supplies the edges and nodes of its own tenant/project only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from runtime.sessions.model import LineageEdge, LineageNode

Graph = tuple[list[LineageNode], list[LineageEdge], bool]


def walk(
    session_id: str,
    depth: int,
    *,
    up: bool,
    down: bool,
    max_nodes: int,
    parents: Callable[[str], Iterable[str]],
    children: Callable[[str], Iterable[str]],
    node: Callable[[str], LineageNode | None],
) -> Graph:
    """Nodes (oldest first) and edges within ``depth`` steps of ``session_id``, at most ``max_nodes``.

    ``node`` gives ``None`` for an id the store does not hold (a parent known only by id: an
    import's lineage that lives elsewhere); it is shown as an unknown stub.
    """
    seen: set[str] = {session_id}
    edges: set[tuple[str, str]] = set()
    frontier, truncated = [session_id], False
    for _ in range(depth):
        nxt: list[str] = []
        for sid in frontier:
            steps = [(p, (p, sid)) for p in parents(sid)] if up else []
            if down:
                steps += [(c, (sid, c)) for c in children(sid)]
            for near, edge in steps:
                if near not in seen:
                    if len(seen) >= max_nodes:
                        truncated = True
                        continue
                    seen.add(near)
                    nxt.append(near)
                edges.add(edge)
        frontier = nxt
        if not frontier:
            break
    nodes = sorted((node(sid) or _unknown(sid) for sid in seen), key=lambda n: (n.created_at, n.id))
    return nodes, [LineageEdge(parent=p, child=c) for p, c in sorted(edges)], truncated


def _unknown(session_id: str) -> LineageNode:
    return LineageNode(id=session_id, op="unknown", length=0, created_at=0.0, stub=True)
