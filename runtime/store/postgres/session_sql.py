"""The SQL of ``PostgresSessionStore`` and how its rows become session values.

Kept apart from the store's logic (``runtime.store.postgres.sessions``) so each stays readable:
here are the statements (each written to be one round trip) and the row-to-model conversions.
"""

from __future__ import annotations

import asyncpg

from runtime.sessions.model import Chunk, SessionInfo
from runtime.sessions.store import StoredChunk, chunks_from, info_from


def chars_of(chunk: Chunk) -> int:
    calls = chunk.tool_calls or ()
    return len(chunk.content) + sum(len(c.function.name) + len(c.function.arguments) for c in calls)


INFO_COLUMNS = (
    "s.id, s.op, s.length, s.placement, s.usage, s.metadata, s.created_at, s.tenant, s.project,"
    " ARRAY(SELECT p.parent_id FROM session_parents p WHERE p.child_id = s.id ORDER BY p.ord) AS parents"
)
SCOPED = "s.tenant = $2 AND s.project = $3 AND s.stub = 0"

# The index ranges ``[lo, hi)`` of each segment of a session's chain, newest segment first: a segment
# holds its chunks from ``parent_length`` (0 for a root segment) up to where its child continues.
CHAIN = f"""
WITH RECURSIVE chain(id, parent_id, lo, hi) AS (
    SELECT g.id, g.parent_id, CASE WHEN g.parent_id IS NULL THEN 0 ELSE g.parent_length END, s.length
    FROM sessions s JOIN segments g ON g.id = s.segment_id
    WHERE s.id = $1 AND {SCOPED}
    UNION ALL
    SELECT g.id, g.parent_id, CASE WHEN g.parent_id IS NULL THEN 0 ELSE g.parent_length END, c.lo
    FROM chain c JOIN segments g ON g.id = c.parent_id
)
"""
# Each segment's chunks are read by a LATERAL subquery: one index range scan of (segment_id, idx) per
# segment of the chain (``OFFSET 0`` keeps the planner from flattening it back into a join). A plain
# join let the planner hash-join the chain against a sequential scan of every chunk in the database:
# a page of 50 chunks took 50 ms beside 100k other chunks and 150 ms inside them; now 0.2 ms either way.
CHUNKS = (
    CHAIN + "SELECT k.uid, k.kind, k.content, k.tool_calls, k.tool_call_id, k.name FROM chain c"
    " CROSS JOIN LATERAL (SELECT * FROM chunks k WHERE k.segment_id = c.id"
    " AND k.idx >= greatest(c.lo, $4) AND k.idx < least(c.hi, $5) OFFSET 0) k"
    " ORDER BY k.idx"
)
UIDS = (
    CHAIN + "SELECT k.uid FROM chain c CROSS JOIN LATERAL (SELECT k.uid, k.idx FROM chunks k"
    " WHERE k.segment_id = c.id AND k.idx >= c.lo AND k.idx < c.hi OFFSET 0) k ORDER BY k.idx"
)
INSERT_CHUNKS = """
INSERT INTO chunks (segment_id, idx, tenant, project, uid, kind, content, tool_calls, tool_call_id, name)
SELECT $1, $2 + u.ord - 1, $3, $4, u.uid, u.kind, u.content, u.tool_calls, u.tool_call_id, u.name
FROM unnest($5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
    WITH ORDINALITY AS u(uid, kind, content, tool_calls, tool_call_id, name, ord)
"""
INSERT_PARENTS = (
    "INSERT INTO session_parents (child_id, ord, parent_id)"
    " SELECT $1, u.ord - 1, u.parent FROM unnest($2::text[]) WITH ORDINALITY AS u(parent, ord)"
)
# A session and its parent edges in one statement (one round trip); the edges' foreign key is checked
# at the statement's end, when the session row is there.
INSERT_SESSION = (
    "WITH s AS (INSERT INTO sessions (id, tenant, project, op, segment_id, length, placement, usage, metadata,"
    " created_at, own_usage, chars) VALUES ($1,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13) RETURNING id) "
    + INSERT_PARENTS.replace("$1", "(SELECT id FROM s)")
)


def info_of(row: asyncpg.Record) -> SessionInfo:
    return info_from(row, row["parents"])


def stored_chunks(rows: list[asyncpg.Record]) -> list[StoredChunk]:
    return chunks_from(rows)


# Each session's segment chain as ranges ``(session, segment, lo, hi)``, for several sessions at once.
CHAINS = f"""
WITH RECURSIVE chain(sid, id, parent_id, lo, hi) AS (
    SELECT s.id, g.id, g.parent_id, CASE WHEN g.parent_id IS NULL THEN 0 ELSE g.parent_length END, s.length
    FROM sessions s JOIN segments g ON g.id = s.segment_id
    WHERE s.id = ANY($1::text[]) AND {SCOPED}
    UNION ALL
    SELECT c.sid, g.id, g.parent_id, CASE WHEN g.parent_id IS NULL THEN 0 ELSE g.parent_length END, c.lo
    FROM chain c JOIN segments g ON g.id = c.parent_id
)
SELECT sid, id, lo, hi FROM chain ORDER BY sid, lo
"""
LENGTHS = f"SELECT s.id, s.length FROM sessions s WHERE s.id = ANY($1::text[]) AND {SCOPED}"
# The uids in given ranges ``(branch, segment, lo, hi)``, each branch's in order.
RANGE_UIDS = """
SELECT r.b, k.uid FROM unnest($1::int[], $2::text[], $3::int[], $4::int[]) AS r(b, seg, lo, hi)
CROSS JOIN LATERAL (
    SELECT k.uid, k.idx FROM chunks k WHERE k.segment_id = r.seg AND k.idx >= r.lo AND k.idx < r.hi OFFSET 0
) k ORDER BY r.b, k.idx
"""
WHERE_UIDS = "SELECT uid, segment_id, idx FROM chunks WHERE uid = ANY($1::text[])"
