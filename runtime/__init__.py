"""The rath-mcp runtime: sessions, durable workflows, agents, sandboxes and memory. Knows nothing of MCP."""

from runtime.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    RathError,
    RunFailure,
    UsageError,
)
from runtime.memory import CommitResult, Extractor, HeuristicExtractor, MemoryHit, MemoryItem, MemoryService
from runtime.runtime import Runtime, resolve_home
from runtime.sessions import Chunk, LineageGraph, Placement, Session, SessionInfo, ToolCall, Usage

__all__ = [
    "Chunk",
    "CommitResult",
    "ConflictError",
    "Extractor",
    "HeuristicExtractor",
    "InvalidInputError",
    "LineageGraph",
    "MemoryHit",
    "MemoryItem",
    "MemoryService",
    "NotFoundError",
    "Placement",
    "RathError",
    "RunFailure",
    "Runtime",
    "Session",
    "SessionInfo",
    "ToolCall",
    "Usage",
    "UsageError",
    "resolve_home",
]
