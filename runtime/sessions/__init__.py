"""Sessions: immutable snapshots of ordered chunks, with placement, usage and a lineage DAG."""

from runtime.sessions.model import (
    Chunk,
    LineageEdge,
    LineageGraph,
    LineageNode,
    Placement,
    Session,
    SessionInfo,
    ToolCall,
    ToolCallFunction,
    Usage,
)
from runtime.sessions.service import SessionService

__all__ = [
    "Chunk",
    "LineageEdge",
    "LineageGraph",
    "LineageNode",
    "Placement",
    "Session",
    "SessionInfo",
    "SessionService",
    "ToolCall",
    "ToolCallFunction",
    "Usage",
]
