"""Tables of the Session engine.

Chunks live in *segments*: a segment is a run of chunks appended contiguously, and may continue
a prefix of a parent segment. A session points at ``(segment_id, length)``; its chunks are the
segment chain's prefix of that length. Appending at the tip of a segment extends it in place
(others holding a shorter length still see their own prefix); appending anywhere else starts a
new segment whose parent is ``(segment, length)``. So fork and detach copy nothing, and append
writes only the new chunks.

``own_usage`` is the usage a session added over its parents' history; a session's usage is the sum
of ``own_usage`` over its ancestry, which is what lets merge count shared usage once. SQLite's 0002
fills it in for rows written before it: a root's own usage is all of its usage, a one-parent
session's is its usage over its parent's; merges (and anything else) count as adding nothing,
which is exact for ``append`` merges and under-counts only what a ``concat`` merge counted twice.

``chunks_uid`` lets a merge ask whether its first branch holds a chunk (by identity) without
reading that branch: a merge then costs what the branches add, not the history they share.
``widest`` is the session's longest chunk in characters: with a page's chunk count it bounds the
page's size, which decides whether the page is read in place on the event loop; NULL (rows written
before it) falls back to the whole session's ``chars``. ``trust`` is each chunk's trust
(user|model|tool|external): rows written before it read NULL and are given their kind's default when
read (``chunks_from``), so an upgrade rewrites no chunk.
"""

from runtime.store.core.schema import AddColumn, Change, Index, Raw, Step, table

SEGMENTS = table(
    "segments",
    """
    id              id     key
    tenant          text
    project         text
    parent_id       id     null references segments(id)
    parent_length   int    default 0
    tip             int
    """,
)
CHUNKS = table(
    "chunks",
    """
    segment_id     id     key references segments(id)
    idx            int    key
    tenant         text
    project        text
    uid            text
    kind           text
    content        text
    tool_calls     json   null
    tool_call_id   text   null
    name           text   null
    """,
    without_rowid=True,
)
SESSIONS = table(
    "sessions",
    """
    id           id     key
    tenant       text
    project      text
    op           text
    segment_id   id     null references segments(id)
    length       int
    placement    json
    usage        json
    metadata     json
    created_at   float
    stub         flag   default 0
    """,
)
SESSION_PARENTS = table(
    "session_parents",
    """
    child_id    id     key references sessions(id)
    ord         int    key
    parent_id   id
    """,
    without_rowid=True,
)
CREATED: list[Change] = [
    SEGMENTS,
    CHUNKS,
    SESSIONS,
    Index("sessions_scope", "sessions", "tenant, project, stub, id"),
    SESSION_PARENTS,
    Index("session_parents_parent", "session_parents", "parent_id"),
]
OWN_USAGE = AddColumn("sessions", "own_usage json null")
FILL_OWN_USAGE = Raw(
    sqlite="""
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
    """
)
CHARS = AddColumn("sessions", "chars int null")
CHUNKS_UID = Index("chunks_uid", "chunks", "uid")
WIDEST = AddColumn("sessions", "widest int null")
TRUST = Step("0006_chunk_trust", AddColumn("chunks", "trust text null"))

SQLITE = [
    Step("0001_sessions", *CREATED),
    Step("0002_session_own_usage", OWN_USAGE, FILL_OWN_USAGE),
    Step("0003_session_chars", CHARS),
    Step("0004_chunk_uids", CHUNKS_UID),
    Step("0005_session_widest", WIDEST),
    TRUST,
]
POSTGRES = [
    Step("0001_sessions", *CREATED, OWN_USAGE, CHARS),  # PostgreSQL came later: SQLite's 0002-0003 folded in
    Step("0002_chunk_uids", CHUNKS_UID),
    Step("0003_session_widest", WIDEST),
    TRUST,
]
