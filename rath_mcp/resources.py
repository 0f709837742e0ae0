"""MCP resources (CONTRACT §5): sessions, their transcripts and lineage, runs, workflows, memory.

Resources are the read-only view a host can attach to a conversation; each is rendered from the
runtime at read time (nothing cached here, so a read is never stale).
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server import MCPServer

from rath_mcp.errors import translate_resource
from runtime import Runtime
from runtime.sessions import Chunk, Session

JSON = "application/json"
MARKDOWN = "text/markdown"
MERMAID = "text/vnd.mermaid"


def dumps(value: Any) -> str:
    """JSON for resource bodies: stable key order, readable, non-ASCII kept as is."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def transcript(session: Session) -> str:
    """A session as Markdown: one section per chunk, tool calls and results labelled."""
    lines = [f"# Session {session.id}", "", f"*{session.op}* · {session.length} chunks", ""]
    for index, chunk in enumerate(session.chunks):
        lines.extend(_chunk_markdown(index, chunk))
    return "\n".join(lines).rstrip() + "\n"


def _chunk_markdown(index: int, chunk: Chunk) -> list[str]:
    title = chunk.kind + (f" ({chunk.name})" if chunk.name else "")
    if chunk.tool_call_id:
        title += f" for call `{chunk.tool_call_id}`"
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
        return transcript(await rt.sessions.get(session_id))

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
