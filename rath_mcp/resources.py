"""MCP resources (CONTRACT §5): sessions, their transcripts and lineage, runs, workflows, memory.

Resources are the read-only view a host can attach to a conversation; each is rendered from the
runtime at read time (nothing cached here, so a read is never stale).
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.resources import BinaryResource, TextResource

from rath_mcp import sdk
from rath_mcp.errors import translate_resource
from runtime import Runtime
from runtime.artifacts.service import is_text
from runtime.sessions import Chunk, Session, SessionInfo
from runtime.sessions.model import TRUST_OF_KIND

JSON = "application/json"
MARKDOWN = "text/markdown"
MERMAID = "text/vnd.mermaid"


def dumps(value: Any) -> str:
    """JSON for resource bodies: stable key order, readable, non-ASCII kept as is."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def transcript(session: Session) -> str:
    """A session as Markdown: one section per chunk, tool calls and results labelled."""
    lines = _transcript_head(session)
    for index, chunk in enumerate(session.chunks):
        lines.extend(_chunk_markdown(index, chunk))
    return "\n".join(lines).rstrip() + "\n"


async def streamed_transcript(rt: Runtime, session_id: str) -> str:
    """``transcript`` of a stored session, its chunks read a page at a time (no whole ``Session`` built)."""
    lines = _transcript_head(await rt.sessions.info(session_id))
    index = 0
    async for page in rt.sessions.pages(session_id):
        for chunk in page:
            lines.extend(_chunk_markdown(index, chunk))
            index += 1
    return "\n".join(lines).rstrip() + "\n"


def _transcript_head(session: SessionInfo) -> list[str]:
    return [f"# Session {session.id}", "", f"*{session.op}* · {session.length} chunks", ""]


def _chunk_markdown(index: int, chunk: Chunk) -> list[str]:
    title = chunk.kind + (f" ({chunk.name})" if chunk.name else "")
    if chunk.tool_call_id:
        title += f" for call `{chunk.tool_call_id}`"
    if chunk.trust != TRUST_OF_KIND[chunk.kind]:  # said only where it is not what the kind implies
        title += f" · trust: {chunk.trust}"
    out = [f"## {index + 1}. {title}", ""]
    if chunk.content:
        out.extend([chunk.content, ""])
    for call in chunk.tool_calls or ():
        out.extend([f"- calls `{call.function.name}` (`{call.id}`) with `{call.function.arguments}`", ""])
    return out


def register_session_resources(server: MCPServer, rt: Runtime) -> None:
    """Session resources: the session as JSON, its transcript (Markdown) and lineage (Mermaid)."""

    @server.resource("rath://sessions/{session_id}", name="session", mime_type=JSON)
    @translate_resource
    async def session_resource(session_id: str) -> str:
        """A session with all its chunks."""
        session = await rt.sessions.get(session_id)
        return dumps({**session.info.summary(), "chunks": session.messages()})

    @server.resource("rath://sessions/{session_id}/transcript", name="session_transcript", mime_type=MARKDOWN)
    @translate_resource
    async def session_transcript(session_id: str) -> str:
        """A session as a readable Markdown transcript."""
        return await streamed_transcript(rt, session_id)

    @server.resource("rath://sessions/{session_id}/lineage", name="session_lineage", mime_type=MERMAID)
    @translate_resource
    async def session_lineage(session_id: str) -> str:
        """A session's lineage DAG as Mermaid text."""
        return (await rt.sessions.lineage(session_id)).mermaid()


def register_memory_resources(server: MCPServer, rt: Runtime) -> None:
    """``rath://memory/{memory_id}``: one remembered item with its content."""

    @server.resource("rath://memory/{memory_id}", name="memory_item", mime_type=JSON)
    @translate_resource
    async def memory_item(memory_id: str) -> str:
        """A remembered item: its memory:// URI, content, tags and source."""
        return dumps((await rt.memory.get(memory_id)).public())


def register_artifact_resources(server: MCPServer, rt: Runtime) -> None:
    """``rath://artifacts/{artifact_id}``: an artifact's content, as text or a base64 blob, with its own MIME type."""

    @server.resource(ARTIFACT_URI, name="artifact", mime_type="application/octet-stream")
    @translate_resource
    async def artifact(artifact_id: str) -> BinaryResource | TextResource:
        """An artifact's content (text when its type is textual and it is UTF-8, else a base64 blob)."""
        found, data = await rt.artifacts.read(artifact_id)
        meta = {"name": found.name, "size": found.size, "sha256": found.sha256}
        uri, mime = found.uri, found.mime_type
        if is_text(mime):
            try:
                return TextResource(uri=uri, name=found.name, mime_type=mime, text=str(data, "utf-8"), meta=meta)
            except UnicodeDecodeError:
                pass
        return BinaryResource(uri=uri, name=found.name, mime_type=mime, data=bytes(data), meta=meta)

    sdk.own_mime_types(server, ARTIFACT_URI)


ARTIFACT_URI = "rath://artifacts/{artifact_id}"


def register_run_resources(server: MCPServer, rt: Runtime) -> None:
    """Runs (subscribable), their events, and the workflows they run."""

    @server.resource("rath://runs/{run_id}", name="run", mime_type=JSON)
    @translate_resource
    async def run_resource(run_id: str) -> str:
        """A run summary with its pending interrupts; subscribe for an update on every status change."""
        run = await rt.runs.get(run_id)
        return dumps({**run.summary(), "state": run.state, "input": run.input, "attempt": run.attempt})

    @server.resource("rath://runs/{run_id}/events", name="run_events", mime_type=JSON)
    @translate_resource
    async def run_events(run_id: str) -> str:
        """A run's first 1000 events, in order."""
        return dumps([e.model_dump(mode="json") for e in await rt.runs.events(run_id, 0, 1000)])

    @server.resource("rath://workflows", name="workflows", mime_type=JSON)
    async def workflows() -> str:
        """Every workflow this server runs: name, description, input schema and steps."""
        return dumps(rt.workflows.describe())

    @server.resource("rath://workflows/{name}", name="workflow", mime_type=JSON)
    @translate_resource
    async def workflow(name: str) -> str:
        """One workflow's description, input schema and step graph."""
        return dumps(rt.workflows.get(name).describe())
