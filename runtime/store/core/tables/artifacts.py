"""Tables of the artifacts layer: one row of metadata per artifact (its bytes are in the blob store).

``artifacts_scope`` pages a scope's artifacts by id; ``artifacts_content`` counts the rows naming one
content (a delete removes the bytes when none is left); the session and run indexes serve the lists
filtered by either. ``artifact_deletions`` marks a content whose bytes a delete is removing: a save of
it meanwhile checks its bytes after its row.
"""

from runtime.store.core.schema import Index, Step, table

ARTIFACTS = table(
    "artifacts",
    """
    id           id     key
    tenant       text
    project      text
    name         text
    size         big
    sha256       text
    mime_type    text
    session_id   id     null
    run_id       id     null
    created_at   float
    """,
)
DELETIONS = table(
    "artifact_deletions",
    """
    tenant    text   key
    project   text   key
    sha256    text   key
    token     text   key
    at        float
    """,
)

MIGRATIONS = [
    Step(
        "0400_artifacts",
        ARTIFACTS,
        Index("artifacts_scope", "artifacts", "tenant, project, id"),
        Index("artifacts_content", "artifacts", "tenant, project, sha256"),
        Index("artifacts_session", "artifacts", "tenant, project, session_id, id"),
        Index("artifacts_run", "artifacts", "tenant, project, run_id, id"),
    ),
    Step("0401_artifact_deletions", DELETIONS),
]
