"""The lineage walk of ``PostgresSessionStore``: one query per level of the frontier, then ``walk``."""

from __future__ import annotations

import asyncpg

from runtime.sessions.lineage import walk
from runtime.sessions.model import LineageEdge, LineageNode

_EDGES = """
SELECT p.child_id, p.parent_id FROM session_parents p JOIN sessions s ON s.id = p.child_id
WHERE s.tenant = $2 AND s.project = $3
  AND ((p.child_id = ANY($1::text[]) AND $4) OR (p.parent_id = ANY($1::text[]) AND $5))
ORDER BY p.child_id, p.ord
"""


async def lineage_walk(
    conn: asyncpg.Connection,
    scope: tuple[str, str],
    session_id: str,
    depth: int,
    up: bool,
    down: bool,
    max_nodes: int,
) -> tuple[list[LineageNode], list[LineageEdge], bool]:
    """``walk`` over this scope's ``session_parents`` and ``sessions``: one query per level fetches
    the edges of the whole frontier, mirroring ``walk``'s own bounds (so it asks no more than it reads),
    then ``walk`` runs over what was fetched, giving exactly the SQLite store's graph."""
    parents: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    seen, frontier = {session_id}, [session_id]
    for _ in range(depth):
        for sid in frontier:
            parents.setdefault(sid, [])
            children.setdefault(sid, [])
        for child, parent in await conn.fetch(_EDGES, frontier, *scope, up, down):
            if child in parents and up:
                parents[child].append(parent)
            if parent in children and down:
                children[parent].append(child)
        nxt: list[str] = []
        for sid in frontier:
            near = (parents[sid] if up else []) + (sorted(children[sid]) if down else [])
            for other in near:
                if other not in seen and len(seen) < max_nodes:
                    seen.add(other)
                    nxt.append(other)
        frontier = nxt
        if not frontier:
            break
    nodes = {
        r["id"]: LineageNode(
            id=r["id"], op=r["op"], length=r["length"], created_at=r["created_at"], stub=bool(r["stub"])
        )
        for r in await conn.fetch(
            "SELECT id, op, length, created_at, stub FROM sessions WHERE id = ANY($1::text[])"
            " AND tenant = $2 AND project = $3",
            list(seen),
            *scope,
        )
    }
    return walk(
        session_id,
        depth,
        up=up,
        down=down,
        max_nodes=max_nodes,
        parents=lambda sid: parents.get(sid, []),
        children=lambda sid: sorted(children.get(sid, [])),
        node=nodes.get,
    )
