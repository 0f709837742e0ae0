"""Tables of the artifacts layer: one row of metadata per artifact (its bytes are in the blob store).

``artifacts_scope`` pages a scope's artifacts by id; ``artifacts_content`` counts the rows naming one
content (a delete removes the bytes when none is left); the session and run indexes serve the lists
filtered by either.
"""

from runtime.store.migration import Migration

MIGRATIONS: list[Migration] = [
    Migration(
        "0400_artifacts",
        """
        CREATE TABLE artifacts (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            name TEXT NOT NULL,
            size INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            mime_type TEXT NOT NULL,
            session_id TEXT,
            run_id TEXT,
            created_at REAL NOT NULL
        );
        CREATE INDEX artifacts_scope ON artifacts (tenant, project, id);
        CREATE INDEX artifacts_content ON artifacts (tenant, project, sha256);
        CREATE INDEX artifacts_session ON artifacts (tenant, project, session_id, id);
        CREATE INDEX artifacts_run ON artifacts (tenant, project, run_id, id);
        """,
    ),
    # A content whose bytes a delete is removing: a save of it meanwhile checks its bytes after its row.
    Migration(
        "0401_artifact_deletions",
        """
        CREATE TABLE artifact_deletions (
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            token TEXT NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (tenant, project, sha256, token)
        );
        """,
    ),
]
