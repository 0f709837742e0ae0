"""The lineage walk of the SQLite session store: a breadth-first search over ``session_parents``.

Bounded twice: by ``depth`` (steps from the focus session) and by ``max_nodes``, because a session
with thousands of forks would otherwise turn one lineage call into thousands of queries and a
Mermaid text no one can read. A walk cut short says so (``truncated``); its edges only join the
nodes it returns. Only edges of sessions in the store's tenant/project are followed.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from runtime.sessions.model import LineageEdge, LineageNode

_PARENTS = (
    "SELECT p.parent_id FROM session_parents p JOIN sessions s ON s.id = p.child_id"
    " WHERE p.child_id = ? AND s.tenant = ? AND s.project = ? ORDER BY p.ord"
)
_CHILDREN = (
    "SELECT p.child_id FROM session_parents p JOIN sessions s ON s.id = p.child_id"
    " WHERE p.parent_id = ? AND s.tenant = ? AND s.project = ? ORDER BY p.child_id"
)


@dataclass(frozen=True)
class Walk:
    nodes: list[LineageNode]
    edges: list[LineageEdge]
    truncated: bool


def walk(
    conn: sqlite3.Connection,
    scope: tuple[str, str],
    session_id: str,
    depth: int,
    *,
    up: bool,
    down: bool,
    max_nodes: int,
) -> Walk:
    """Nodes (oldest first) and edges within ``depth`` steps of ``session_id``, at most ``max_nodes``."""
    seen: set[str] = {session_id}
    edges: set[tuple[str, str]] = set()
    frontier, truncated = [session_id], False
    for _ in range(depth):
        nxt: list[str] = []
        for sid in frontier:
            steps = [(p, (p, sid)) for (p,) in conn.execute(_PARENTS, (sid, *scope))] if up else []
            if down:
                steps += [(c, (sid, c)) for (c,) in conn.execute(_CHILDREN, (sid, *scope))]
            for node, edge in steps:
                if node not in seen:
                    if len(seen) >= max_nodes:
                        truncated = True
                        continue
                    seen.add(node)
                    nxt.append(node)
                edges.add(edge)
        frontier = nxt
        if not frontier:
            break
    nodes = sorted((_node(conn, scope, sid) for sid in seen), key=lambda n: (n.created_at, n.id))
    return Walk(nodes, [LineageEdge(parent=p, child=c) for p, c in sorted(edges)], truncated)


def _node(conn: sqlite3.Connection, scope: tuple[str, str], session_id: str) -> LineageNode:
    row = conn.execute(
        "SELECT id, op, length, created_at, stub FROM sessions WHERE id = ? AND tenant = ? AND project = ?",
        (session_id, *scope),
    ).fetchone()
    if row is None:  # a parent known only by id (an import's lineage that lives elsewhere)
        return LineageNode(id=session_id, op="unknown", length=0, created_at=0.0, stub=True)
    return LineageNode(
        id=row["id"], op=row["op"], length=row["length"], created_at=row["created_at"], stub=bool(row["stub"])
    )
