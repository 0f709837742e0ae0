"""Sessions: immutable snapshots of ordered chunks, with placement, usage and a lineage DAG.

Every name is imported on first use (``runtime.lazy``).
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_exports

if TYPE_CHECKING:
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

_EXPORTS = {
    "Chunk": "runtime.sessions.model",
    "InMemoryHome": "runtime.sessions.memory_store",
    "InMemorySessionStore": "runtime.sessions.memory_store",
    "LineageEdge": "runtime.sessions.model",
    "LineageGraph": "runtime.sessions.model",
    "LineageNode": "runtime.sessions.model",
    "Placement": "runtime.sessions.model",
    "Session": "runtime.sessions.model",
    "SessionInfo": "runtime.sessions.model",
    "SessionService": "runtime.sessions.service",
    "SessionStore": "runtime.sessions.store",
    "ToolCall": "runtime.sessions.model",
    "ToolCallFunction": "runtime.sessions.model",
    "Usage": "runtime.sessions.model",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

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
