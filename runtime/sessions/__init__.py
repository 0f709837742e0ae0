"""Sessions: immutable snapshots of ordered chunks, with placement, usage and a lineage DAG."""

from runtime.sessions.memory_store import InMemoryHome, InMemorySessionStore
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
from runtime.sessions.store import SessionStore

__all__ = [
    "Chunk",
    "InMemoryHome",
    "InMemorySessionStore",
    "LineageEdge",
    "LineageGraph",
    "LineageNode",
    "Placement",
    "Session",
    "SessionInfo",
    "SessionService",
    "SessionStore",
    "ToolCall",
    "ToolCallFunction",
    "Usage",
]
