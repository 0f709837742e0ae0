"""Structured results of the MCP tools (each becomes the tool's ``outputSchema``).

Plain pydantic models built from runtime values: the runtime knows nothing of MCP, and these
models are the one place its values take their wire shape.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from runtime.sessions import LineageGraph, SessionInfo


class SessionSummary(BaseModel):
    """A session without its chunks."""

    session_id: str
    parents: list[str]
    op: str
    length: int = Field(description="number of chunks")
    placement: dict[str, Any]
    usage: dict[str, int]
    metadata: dict[str, Any]
    created_at: float

    @classmethod
    def of(cls, info: SessionInfo) -> SessionSummary:
        return cls(
            session_id=info.id,
            parents=list(info.parents),
            op=info.op,
            length=info.length,
            placement=info.placement.model_dump(mode="json"),
            usage=info.usage.model_dump(mode="json"),
            metadata=dict(info.metadata),
            created_at=info.created_at,
        )


class SessionPage(SessionSummary):
    """A session and one page of its chunks."""

    chunks: list[dict[str, Any]]
    offset: int
    next_offset: int | None = Field(description="pass as offset for the next page; null at the end")


class SessionList(BaseModel):
    sessions: list[SessionSummary]
    next_cursor: str | None = Field(description="pass as cursor for the next page; null at the end")


class ForkResult(BaseModel):
    session_ids: list[str]
    parent_id: str


class LineageResult(BaseModel):
    session_id: str
    nodes: list[dict[str, Any]]
    edges: list[dict[str, str]]
    mermaid: str

    @classmethod
    def of(cls, graph: LineageGraph) -> LineageResult:
        return cls(
            session_id=graph.root,
            nodes=[n.model_dump(mode="json") for n in graph.nodes],
            edges=[e.model_dump(mode="json") for e in graph.edges],
            mermaid=graph.mermaid(),
        )


class ExportResult(BaseModel):
    session_id: str
    jsonl: str
