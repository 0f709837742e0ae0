"""What an artifact is (``Artifact``) and what the artifact service needs from a store (``ArtifactRecords``).

An artifact is a file kept beyond the sandbox it was made in: its bytes live in a blob store
(``runtime.artifacts.blobs``: a directory, or any S3-compatible bucket) under a key made of its
tenant/project and the sha256 of its content, so the same bytes are kept once per tenant/project
however many artifacts name them; its metadata is one row of the runtime's store (written once in
``runtime/store/core/artifacts.py`` for both backends), written only after the bytes are durable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

URI_PREFIX = "rath://artifacts/"

CHUNK = 4 * 1024 * 1024
"""Bytes per piece of a streamed read or hashed file (large: each piece is one thread hop or one buffer)."""

LARGE_RESULT_BYTES = 256 * 1024
"""A tool result larger than this is kept as an artifact and handed over as a link (CONTRACT §14)."""

COLUMNS = "id, tenant, project, name, size, sha256, mime_type, session_id, run_id, created_at"


@dataclass(frozen=True)
class Artifact:
    """One artifact's metadata (its bytes are the blob at ``blob_key(tenant, project, sha256)``)."""

    id: str
    tenant: str
    project: str
    name: str
    size: int
    sha256: str
    mime_type: str
    session_id: str | None
    run_id: str | None
    created_at: float

    @property
    def uri(self) -> str:
        return URI_PREFIX + self.id

    @property
    def key(self) -> str:
        return blob_key(self.tenant, self.project, self.sha256)

    def row(self) -> tuple[Any, ...]:
        return tuple(asdict(self).values())

    @classmethod
    def from_row(cls, row: Any) -> Artifact:
        return cls(
            id=row["id"],
            tenant=row["tenant"],
            project=row["project"],
            name=row["name"],
            size=int(row["size"]),
            sha256=row["sha256"],
            mime_type=row["mime_type"],
            session_id=row["session_id"],
            run_id=row["run_id"],
            created_at=float(row["created_at"]),
        )

    def public(self) -> dict[str, Any]:
        """The metadata as the tools show it (CONTRACT §14): the scope is the caller's own, so not shown."""
        return {
            "artifact_id": self.id,
            "uri": self.uri,
            "name": self.name,
            "size": self.size,
            "sha256": self.sha256,
            "mime_type": self.mime_type,
            "session_id": self.session_id,
            "run_id": self.run_id,
            "created_at": self.created_at,
        }


def blob_key(tenant: str, project: str, sha256: str) -> str:
    """Where a tenant/project's bytes of one content live in the blob store (fanned out by 2 hex digits)."""
    return f"{tenant}/{project}/{sha256[:2]}/{sha256}"


class ArtifactRecords(Protocol):
    """The artifact rows of one tenant/project; each method is one transaction."""

    async def add(self, artifact: Artifact) -> bool:
        """Insert the row; True when a delete of the same content is under way (``delete`` … ``end_deletion``)."""
        ...

    async def get(self, artifact_id: str) -> Artifact | None:
        """The artifact, or None when there is none of that id in this tenant/project."""
        ...

    async def find(self, sha256: str, name: str, session_id: str | None, run_id: str | None) -> Artifact | None:
        """The oldest artifact of this tenant/project with this content, name, session and run."""
        ...

    async def list(
        self, *, session_id: str | None, run_id: str | None, after: str | None, limit: int
    ) -> Sequence[Artifact]:
        """Oldest first by id, after the id ``after``, at most ``limit``."""
        ...

    async def delete(self, artifact_id: str, token: str) -> tuple[Artifact | None, int]:
        """Remove the row; the artifact removed (None if there was none) and how many rows of this
        tenant/project still name its content. At 0 the content is marked as being deleted under
        ``token`` until ``end_deletion``: a save of it meanwhile is told so by ``add``."""
        ...

    async def mark_unreferenced(self, sha256: str, token: str) -> int:
        """How many rows of this tenant/project name the content; at 0 it is marked as being deleted
        under ``token`` (as by ``delete``) until ``end_deletion``."""
        ...

    async def end_deletion(self, sha256: str, token: str) -> None: ...

    async def end_deletions_before(self, cutoff: float) -> int:
        """Forget the marks of deletes begun before ``cutoff`` and never ended (a process died); how many."""
        ...

    async def refs(self, sha256: str) -> int:
        """How many rows of this tenant/project name the content ``sha256``."""
        ...

    async def total_size(self) -> int:
        """Bytes of every artifact of this tenant/project (counting each artifact, shared content or not)."""
        ...
