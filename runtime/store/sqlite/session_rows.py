"""How ``SQLiteSessionStore`` reads rows: sessions into ``SessionInfo``, chunks into ``StoredChunk``, uids
over segment ranges, and the lineage walk over ``session_parents``.

Kept apart from the store's writes and queries (``runtime.store.sqlite.sessions``) so each stays readable.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from runtime.sessions.lineage import Graph, walk
from runtime.sessions.model import Chunk, LineageNode, SessionInfo
from runtime.sessions.store import Range, StoredChunk, chunks_from, info_from


def chars_of(chunk: Chunk) -> int:
    calls = chunk.tool_calls or ()
    return len(chunk.content) + sum(len(c.function.name) + len(c.function.arguments) for c in calls)


INFO_COLUMNS = (
    "s.id, s.op, s.length, s.placement, s.usage, s.metadata, s.created_at, s.tenant, s.project,"
    " (SELECT json_group_array(parent_id) FROM (SELECT parent_id FROM session_parents p"
    "  WHERE p.child_id = s.id ORDER BY ord)) AS parents"
)
SELECT_INFO = f"SELECT {INFO_COLUMNS} FROM sessions s"


def info_of(row: sqlite3.Row) -> SessionInfo:
    return info_from(row, json.loads(row["parents"]))


def stored_chunks(rows: list[tuple[Any, ...]]) -> list[StoredChunk]:
    return chunks_from(rows)


def uids_in(conn: sqlite3.Connection, ranges: list[Range]) -> list[str]:
    out: list[str] = []
    cursor = conn.cursor()
    cursor.row_factory = None
    for segment, lo, hi in ranges:
        rows = cursor.execute(
            "SELECT uid FROM chunks WHERE segment_id = ? AND idx >= ? AND idx < ? ORDER BY idx", (segment, lo, hi)
        )
        out.extend(r[0] for r in rows)
    return out


_PARENTS = (
    "SELECT p.parent_id FROM session_parents p JOIN sessions s ON s.id = p.child_id"
    " WHERE p.child_id = ? AND s.tenant = ? AND s.project = ? ORDER BY p.ord"
)
_CHILDREN = (
    "SELECT p.child_id FROM session_parents p JOIN sessions s ON s.id = p.child_id"
    " WHERE p.parent_id = ? AND s.tenant = ? AND s.project = ? ORDER BY p.child_id"
)


def lineage_walk(
    conn: sqlite3.Connection,
    scope: tuple[str, str],
    session_id: str,
    depth: int,
    *,
    up: bool,
    down: bool,
    max_nodes: int,
) -> Graph:
    """``walk`` over the ``session_parents`` and ``sessions`` tables, in the tenant/project ``scope``."""

    def node(sid: str) -> LineageNode | None:
        row = conn.execute(
            "SELECT id, op, length, created_at, stub FROM sessions WHERE id = ? AND tenant = ? AND project = ?",
            (sid, *scope),
        ).fetchone()
        if row is None:
            return None
        return LineageNode(
            id=row["id"], op=row["op"], length=row["length"], created_at=row["created_at"], stub=bool(row["stub"])
        )

    return walk(
        session_id,
        depth,
        up=up,
        down=down,
        max_nodes=max_nodes,
        parents=lambda sid: [p for (p,) in conn.execute(_PARENTS, (sid, *scope))],
        children=lambda sid: [c for (c,) in conn.execute(_CHILDREN, (sid, *scope))],
        node=node,
    )
