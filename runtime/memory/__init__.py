"""The memory layer: persistent, searchable knowledge shared by every agent and process on a store.

``runtime.memory`` (a ``MemoryService``) remembers text at ``memory://{user|agent|session|resources}/…``
URIs, recalls it by BM25 (SQLite FTS5, any script including Chinese and Japanese), and commits
sessions: their transcript is archived and an ``Extractor`` picks out items worth keeping.

Every name is imported on first use (``runtime.lazy``).
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_exports

if TYPE_CHECKING:
    from runtime.memory.context import untrusted_context
    from runtime.memory.extract import Extractor, HeuristicExtractor, transcript
    from runtime.memory.model import SCOPES, CommitResult, MemoryHit, MemoryItem
    from runtime.memory.service import MemoryService
    from runtime.memory.store import MemoryStore, NewMemory

_EXPORTS = {
    "CommitResult": "runtime.memory.model",
    "Extractor": "runtime.memory.extract",
    "HeuristicExtractor": "runtime.memory.extract",
    "MemoryHit": "runtime.memory.model",
    "MemoryItem": "runtime.memory.model",
    "MemoryService": "runtime.memory.service",
    "MemoryStore": "runtime.memory.store",
    "NewMemory": "runtime.memory.store",
    "SCOPES": "runtime.memory.model",
    "transcript": "runtime.memory.extract",
    "untrusted_context": "runtime.memory.context",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

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
