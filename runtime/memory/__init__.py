"""The memory layer: persistent, searchable knowledge shared by every agent and process on a store.

``runtime.memory`` (a ``MemoryService``) remembers text at ``memory://{user|agent|session|resources}/…``
URIs, recalls it by BM25 (SQLite FTS5, any script including Chinese and Japanese), and commits
sessions: their transcript is archived and an ``Extractor`` picks out items worth keeping.
"""

from runtime.memory.context import untrusted_context
from runtime.memory.extract import Extractor, HeuristicExtractor, transcript
from runtime.memory.model import SCOPES, CommitResult, MemoryHit, MemoryItem
from runtime.memory.service import MemoryService
from runtime.memory.store import MemoryStore, NewMemory

__all__ = [
    "SCOPES",
    "CommitResult",
    "Extractor",
    "HeuristicExtractor",
    "MemoryHit",
    "MemoryItem",
    "MemoryService",
    "MemoryStore",
    "NewMemory",
    "transcript",
    "untrusted_context",
]
