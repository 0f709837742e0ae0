"""Tables of the Session engine.

Chunks live in *segments*: a segment is a run of chunks appended contiguously, and may continue
a prefix of a parent segment. A session points at ``(segment_id, length)``; its chunks are the
segment chain's prefix of that length. Appending at the tip of a segment extends it in place
(others holding a shorter length still see their own prefix); appending anywhere else starts a
new segment whose parent is ``(segment, length)``. So fork and detach copy nothing, and append
writes only the new chunks.

``own_usage`` (0002) is the usage a session added over its parents' history; a session's usage is
the sum of ``own_usage`` over its ancestry, which is what lets merge count shared usage once.
0002 fills it in for rows written before it: a root's own usage is all of its usage, a one-parent
session's is its usage over its parent's; merges (and anything else) count as adding nothing,
which is exact for ``append`` merges and under-counts only what a ``concat`` merge counted twice.

``chunks_uid`` (0004) lets a merge ask whether its first branch holds a chunk (by identity) without
reading that branch: a merge then costs what the branches add, not the history they share.
``widest`` (0005) is the session's longest chunk in characters: with a page's chunk count it bounds
the page's size, which decides whether the page is read in place on the event loop; NULL (rows
written before it) falls back to the whole session's ``chars``.
"""

from runtime.store.migration import Migration

MIGRATIONS = [
    Migration(
        "0001_sessions",
        """
        CREATE TABLE segments (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            parent_id TEXT REFERENCES segments(id),
            parent_length INTEGER NOT NULL DEFAULT 0,
            tip INTEGER NOT NULL
        );
        CREATE TABLE chunks (
            segment_id TEXT NOT NULL REFERENCES segments(id),
            idx INTEGER NOT NULL,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            uid TEXT NOT NULL,
            kind TEXT NOT NULL,
            content TEXT NOT NULL,
            tool_calls TEXT,
            tool_call_id TEXT,
            name TEXT,
            PRIMARY KEY (segment_id, idx)
        ) WITHOUT ROWID;
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            op TEXT NOT NULL,
            segment_id TEXT REFERENCES segments(id),
            length INTEGER NOT NULL,
            placement TEXT NOT NULL,
            usage TEXT NOT NULL,
            metadata TEXT NOT NULL,
            created_at REAL NOT NULL,
            stub INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX sessions_scope ON sessions (tenant, project, stub, id);
        CREATE TABLE session_parents (
            child_id TEXT NOT NULL REFERENCES sessions(id),
            ord INTEGER NOT NULL,
            parent_id TEXT NOT NULL,
            PRIMARY KEY (child_id, ord)
        ) WITHOUT ROWID;
        CREATE INDEX session_parents_parent ON session_parents (parent_id);
        """,
    ),
    Migration(
        "0002_session_own_usage",
        """
        ALTER TABLE sessions ADD COLUMN own_usage TEXT;
        UPDATE sessions SET own_usage = usage WHERE stub = 0
            AND NOT EXISTS (SELECT 1 FROM session_parents p WHERE p.child_id = sessions.id);
        UPDATE sessions SET own_usage = (
            SELECT json_object(
                'prompt_tokens', max(0, json_extract(sessions.usage, '$.prompt_tokens')
                    - json_extract(parent.usage, '$.prompt_tokens')),
                'completion_tokens', max(0, json_extract(sessions.usage, '$.completion_tokens')
                    - json_extract(parent.usage, '$.completion_tokens')),
                'total_tokens', max(0, json_extract(sessions.usage, '$.total_tokens')
                    - json_extract(parent.usage, '$.total_tokens')))
            FROM session_parents p JOIN sessions parent ON parent.id = p.parent_id AND parent.stub = 0
            WHERE p.child_id = sessions.id)
        WHERE stub = 0 AND op != 'merge'
            AND (SELECT count(*) FROM session_parents p WHERE p.child_id = sessions.id) = 1;
        """,
    ),
    Migration(
        "0003_session_chars",
        """
        ALTER TABLE sessions ADD COLUMN chars INTEGER;
        """,
    ),
    Migration(
        "0004_chunk_uids",
        """
        CREATE INDEX chunks_uid ON chunks (uid);
        """,
    ),
    Migration(
        "0005_session_widest",
        """
        ALTER TABLE sessions ADD COLUMN widest INTEGER;
        """,
    ),
    # Each chunk's trust (user|model|tool|external). Rows written before it read NULL and are given
    # their kind's default when read (``chunks_from``): no rewrite of every chunk on upgrade.
    Migration(
        "0006_chunk_trust",
        """
        ALTER TABLE chunks ADD COLUMN trust TEXT;
        """,
    ),
]
