"""Artifact tools (CONTRACT §14): keep a workspace file beyond its sandbox, list, get (with a link), delete.

Thin: each tool is one call of ``rt.artifacts`` (``runtime.artifacts.ArtifactService``) and the
shape of its answer. ``artifact_get`` answers with the metadata and a ``resource_link`` to
``rath://artifacts/{artifact_id}`` (``rath_mcp/resources.py``), which a client reads for the content.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from mcp_types import CallToolResult, ResourceLink, TextContent, ToolAnnotations
from pydantic import Field

from rath_mcp.errors import translate_tool
from rath_mcp.models import WireModel
from rath_mcp.tools.arguments import ID_CHARS, SessionId
from runtime import Runtime
from runtime.artifacts import Artifact
from runtime.artifacts.model import LARGE_RESULT_BYTES

PATH_CHARS = 4096
"""A workspace path (Linux's PATH_MAX)."""
MAX_PAGE = 200

ArtifactId = Annotated[str, Field(min_length=1, max_length=ID_CHARS, description="an artifact id, art_…")]
WorkspaceFile = Annotated[
    str,
    Field(
        min_length=1,
        max_length=PATH_CHARS,
        description="a file of the session's workspace, relative to its root (e.g. 'out/report.pdf')",
    ),
]
ArtifactCursor = Annotated[
    str | None,
    Field(
        max_length=ID_CHARS,
        pattern=r"^art_[0-9a-f]{24}$",
        description="the next_cursor of the previous page; omit it for the first page",
    ),
]
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
SAVES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
DELETES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


class ArtifactInfo(WireModel):
    """An artifact's metadata; ``uri`` is the resource holding its content."""

    artifact_id: str
    uri: str = Field(description="rath://artifacts/{artifact_id}: read it for the content")
    name: str
    size: int = Field(description="bytes")
    sha256: str
    mime_type: str
    session_id: str | None
    run_id: str | None
    created_at: float

    @classmethod
    def of(cls, artifact: Artifact) -> ArtifactInfo:
        return cls(**artifact.public())


class ArtifactList(WireModel):
    artifacts: list[ArtifactInfo] = Field(description="oldest first")
    next_cursor: str | None = Field(description="pass as cursor for the next page; null on the last")


def resource_link(artifact: Artifact) -> ResourceLink:
    return ResourceLink(
        uri=artifact.uri,
        name=artifact.name,
        mime_type=artifact.mime_type,
        size=artifact.size,
        description=f"artifact {artifact.id} ({artifact.size} bytes, sha256 {artifact.sha256[:12]}…)",
    )


LARGE_BYTES = LARGE_RESULT_BYTES
"""A tool result larger than this is kept as an artifact and answered with a link (CONTRACT §14)."""
PREVIEW_CHARS = 1_000


async def kept_if_large(
    rt: Runtime, text: str, name: str, mime_type: str, session_id: str | None = None, run_id: str | None = None
) -> tuple[Artifact, str] | None:
    """``text`` kept as an artifact, and its first characters, when it is over ``LARGE_BYTES``; else None."""
    data = text.encode("utf-8")
    if len(data) <= LARGE_BYTES:
        return None
    artifact = await rt.artifacts.keep(data, name=name, mime_type=mime_type, session_id=session_id, run_id=run_id)
    return artifact, text[:PREVIEW_CHARS]


def register(server: MCPServer, rt: Runtime) -> None:
    """Add the artifact tools to ``server``, bound to ``rt.artifacts``."""

    @server.tool(annotations=SAVES)
    @translate_tool
    async def artifact_save(session_id: SessionId, path: WorkspaceFile) -> ArtifactInfo:
        """Keep a file of a session's sandbox workspace as an artifact, beyond the sandbox's life."""
        return ArtifactInfo.of(await rt.artifacts.save_from_session(session_id, path))

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def artifact_list(
        session_id: Annotated[str | None, Field(max_length=ID_CHARS, description="only this session's")] = None,
        run_id: Annotated[str | None, Field(max_length=ID_CHARS, description="only this run's")] = None,
        cursor: ArtifactCursor = None,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 50,
    ) -> ArtifactList:
        """List artifacts, oldest first, a page at a time."""
        page, after = await rt.artifacts.list(session_id=session_id, run_id=run_id, cursor=cursor, limit=limit)
        return ArtifactList(artifacts=[ArtifactInfo.of(a) for a in page], next_cursor=after)

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def artifact_get(artifact_id: ArtifactId) -> Annotated[CallToolResult, ArtifactInfo]:
        """An artifact's metadata, and a resource_link to its content (rath://artifacts/{artifact_id})."""
        artifact = await rt.artifacts.get(artifact_id)
        info = ArtifactInfo.of(artifact)
        return CallToolResult(
            content=[TextContent(text=info.model_dump_json()), resource_link(artifact)],
            structured_content=info.model_dump(mode="json"),
        )

    @server.tool(annotations=DELETES)
    @translate_tool
    async def artifact_delete(artifact_id: ArtifactId) -> ArtifactInfo:
        """Delete an artifact (its bytes too, when no other artifact has the same content)."""
        return ArtifactInfo.of(await rt.artifacts.delete(artifact_id))
