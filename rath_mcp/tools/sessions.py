"""Session tools: create, append, read, list, fork, merge, detach, lineage, export, import.

Every tool is a thin call into ``rt.sessions``; runtime usage errors become readable ``isError``
results through :mod:`rath_mcp.errors`. Nothing is half-written on error: each runtime call is one
transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from rath_mcp.errors import translate_tool
from rath_mcp.models import (
    MAX_INDEX,
    ExportResult,
    ForkResult,
    LineageResult,
    SessionList,
    SessionPage,
    SessionSummary,
)
from rath_mcp.tools.arguments import (
    INSIDE,
    JSONL_CHARS,
    PAGE_CHARS,
    JsonObject,
    OptionalText,
    SessionCursor,
    SessionId,
    SessionIds,
    Text,
    Workspace,
)
from rath_mcp.tools.artifacts import kept_if_large, resource_link
from runtime import InvalidInputError, Runtime
from runtime.sessions import Chunk, Placement

Role = Literal["user", "assistant", "system"]
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

Limit = Annotated[int, Field(ge=1, le=500, description="page size, 1..500")]


async def placement_for(rt: Runtime, workspace: str | None) -> Placement | None:
    """The placement a new session gets for ``workspace``: the runtime's default sandbox backend."""
    return rt.sandboxes.placement(workspace) if workspace is not None else None


def _placement_check(rt: Runtime) -> Callable[[Placement], Placement]:
    """The sandbox registry's check of an imported session's placement (known backend, plain workspace name)."""

    def check(placement: Placement) -> Placement:
        return rt.sandboxes.placement(placement.workspace, placement.backend)

    return check


def _fitting(chunks: list[Chunk]) -> int:
    """How many of ``chunks`` (at least one) a page holds within ``PAGE_CHARS`` of content: one answer's
    size, and so the work of sending it, stays bounded however long a session's messages are."""
    size = 0
    for n, chunk in enumerate(chunks):
        size += len(chunk.content)
        if size > PAGE_CHARS and n > 0:
            return n
    return len(chunks)


def register(server: MCPServer, rt: Runtime) -> None:
    """Add the session tools to ``server``, bound to ``rt``."""

    @server.tool(annotations=WRITES)
    @translate_tool
    async def session_create(
        message: Annotated[OptionalText, Field(description="first message of the session")] = None,
        role: Annotated[Role, Field(description="kind of the first message")] = "user",
        system: Annotated[OptionalText, Field(description="a system prompt, placed first")] = None,
        workspace: Workspace = None,
        metadata: Annotated[JsonObject, Field(description="JSON kept with the session" + INSIDE)] = None,
    ) -> SessionSummary:
        """Create a new root session, optionally with a system prompt and a first message."""
        chunks: list[dict[str, Any]] = []
        if system is not None:
            chunks.append({"kind": "system", "content": system})
        if message is not None:
            chunks.append({"kind": role, "content": message})
        info = await rt.sessions.create(chunks, placement=await placement_for(rt, workspace), metadata=metadata)
        return SessionSummary.of(info)

    @server.tool(annotations=WRITES)
    @translate_tool
    async def session_append(
        session_id: SessionId, content: Annotated[Text, Field(description="the message")], role: Role = "user"
    ) -> SessionSummary:
        """Append a message; returns the id of the new snapshot (the old one is unchanged)."""
        return SessionSummary.of(await rt.sessions.append(session_id, [{"kind": role, "content": content}]))

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def session_get(
        session_id: SessionId, offset: Annotated[int, Field(ge=0, le=MAX_INDEX)] = 0, limit: Limit = 50
    ) -> Annotated[CallToolResult, SessionPage]:
        """A session's fields and one page of its chunks (oldest first): at most limit chunks, and no more
        than about 1,000,000 characters of content (then next_offset says where to go on). A page over
        256 KB comes as a resource_link to its chunks."""
        info, chunks = await rt.sessions.window(session_id, offset, limit)
        chunks = chunks[: _fitting(chunks)]
        end = offset + len(chunks)
        page = SessionPage.of(info, chunks=chunks, offset=offset, next_offset=end if end < info.length else None)
        text = json.dumps([c.model_dump(mode="json") for c in chunks], ensure_ascii=False)
        kept = await kept_if_large(rt, text, f"{session_id}-chunks-{offset}-{end}.json", "application/json", session_id)
        if kept is None:  # the model as such: the SDK renders it as before, with no second validation of its chunks
            return page  # type: ignore[return-value]
        artifact, preview = kept  # a link and a preview, not up to a megabyte into the client's context
        link = {"chunks": [], "artifact_id": artifact.id, "uri": artifact.uri, "preview": preview}
        linked = page.model_copy(update=link)
        return CallToolResult(
            content=[TextContent(text=linked.model_dump_json()), resource_link(artifact)],
            structured_content=linked.model_dump(mode="json"),
        )

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def session_list(cursor: SessionCursor = None, limit: Limit = 50) -> SessionList:
        """Sessions, newest first, one page at a time."""
        page, next_cursor = await rt.sessions.page(cursor, limit)
        return SessionList(sessions=[SessionSummary.of(i) for i in page], next_cursor=next_cursor)

    @server.tool(annotations=WRITES)
    @translate_tool
    async def session_fork(
        session_id: SessionId,
        count: Annotated[int, Field(ge=1, le=64)] = 1,
        isolate_workspace: Annotated[bool, Field(description="give each fork its own copy of the workspace")] = False,
    ) -> ForkResult:
        """Fork a session into ``count`` children that share its history (O(1): nothing is copied)."""
        placements = None
        if isolate_workspace:
            base = await rt.sessions.info(session_id)
            placements = [await rt.sandboxes.isolate(base.placement) for _ in range(count)]
        forks = await rt.sessions.fork(session_id, count, placements=placements)
        return ForkResult(session_ids=[f.id for f in forks], parent_id=session_id)

    @server.tool(annotations=WRITES)
    @translate_tool
    async def session_merge(
        session_ids: SessionIds,
        strategy: Literal["append", "concat"] = "append",
    ) -> SessionSummary:
        """Merge branches: their shared history once, then each branch's own chunks in argument order."""
        return SessionSummary.of(await rt.sessions.merge(session_ids, strategy))

    @server.tool(annotations=WRITES)
    @translate_tool
    async def session_detach(session_id: SessionId) -> SessionSummary:
        """A new root session with the same chunks and placement, but no parents."""
        return SessionSummary.of(await rt.sessions.detach(session_id))

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def session_lineage(session_id: SessionId, depth: Annotated[int, Field(ge=1, le=1000)] = 20) -> LineageResult:
        """The lineage DAG around a session: nodes, edges and a Mermaid diagram."""
        return LineageResult.of(await rt.sessions.lineage(session_id, depth))

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def session_export(session_id: SessionId) -> Annotated[CallToolResult, ExportResult]:
        """The session as JSONL (header, chunks with content, then its ancestry) for session_import."""
        lines: list[str] = []
        size = 0
        async for line in rt.sessions.export_lines(session_id):  # stops at the limit: the work stays bounded
            size += len(line)
            if size > JSONL_CHARS:
                raise InvalidInputError(
                    f"session {session_id} exports to more than {JSONL_CHARS} characters, more than session_import "
                    "takes; read it a page at a time with session_get instead"
                )
            lines.append(line)
        text = "".join(lines)
        kept = await kept_if_large(rt, text, f"{session_id}.jsonl", "application/x-ndjson", session_id)
        if kept is not None:  # a link and a preview, not a quarter megabyte into the client's context
            artifact, preview = kept
            result = ExportResult(
                session_id=session_id, jsonl=None, artifact_id=artifact.id, uri=artifact.uri, preview=preview
            )
            return CallToolResult(
                content=[TextContent(text=result.model_dump_json()), resource_link(artifact)],
                structured_content=result.model_dump(mode="json"),
            )
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content=ExportResult(session_id=session_id, jsonl=text).model_dump(
                mode="json", exclude_none=True
            ),
        )

    @server.tool(annotations=WRITES)
    @translate_tool
    async def session_import(
        jsonl: Annotated[str, Field(max_length=JSONL_CHARS, description="text made by session_export")],
    ) -> SessionSummary:
        """Restore an exported session under its own id, with its lineage (importing twice is a no-op)."""
        return SessionSummary.of(await rt.sessions.import_jsonl(jsonl, check_placement=_placement_check(rt)))
