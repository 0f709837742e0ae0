"""Tables of the artifacts layer: one row of metadata per artifact (its bytes are in the blob store).

``artifacts_scope`` pages a scope's artifacts by id; ``artifacts_content`` counts the rows naming one
content (a delete removes the bytes when none is left); the session and run indexes serve the lists
filtered by either. ``artifact_deletions`` marks a content whose bytes a delete is removing: a save of
it meanwhile checks its bytes after its row.
"""

from runtime.store.core.schema import BIG, FLOAT, ID, TEXT, Col, Index, Step, Table

ARTIFACTS = Table(
    "artifacts",
    [
        Col("id", ID),
        Col("tenant", TEXT),
        Col("project", TEXT),
        Col("name", TEXT),
        Col("size", BIG),
        Col("sha256", TEXT),
        Col("mime_type", TEXT),
        Col("session_id", ID, null=True),
        Col("run_id", ID, null=True),
        Col("created_at", FLOAT),
    ],
    key=["id"],
)
DELETIONS = Table(
    "artifact_deletions",
    [Col("tenant", TEXT), Col("project", TEXT), Col("sha256", TEXT), Col("token", TEXT), Col("at", FLOAT)],
    key=["tenant", "project", "sha256", "token"],
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
