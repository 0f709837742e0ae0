"""The memory layer: persistent, searchable knowledge shared by every agent and process on a store.

``runtime.memory`` (a ``MemoryService``) remembers text at ``memory://{user|agent|session|resources}/…``
URIs, recalls it by BM25 (SQLite FTS5, any script including Chinese and Japanese), and commits
sessions: their transcript is archived and an ``Extractor`` picks out items worth keeping.

Every name is imported on first use (``runtime.lazy``).
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_namespace

if TYPE_CHECKING:  # the public names, one import each: lazy_namespace reads them (see runtime.lazy)
    from runtime.memory.context import untrusted_context as untrusted_context
    from runtime.memory.extract import Extractor as Extractor
    from runtime.memory.extract import HeuristicExtractor as HeuristicExtractor
    from runtime.memory.extract import transcript as transcript
    from runtime.memory.model import SCOPES as SCOPES
    from runtime.memory.model import CommitResult as CommitResult
    from runtime.memory.model import MemoryHit as MemoryHit
    from runtime.memory.model import MemoryItem as MemoryItem
    from runtime.memory.service import MemoryService as MemoryService
    from runtime.memory.store import MemoryStore as MemoryStore
    from runtime.memory.store import NewMemory as NewMemory

__getattr__, __dir__, __all__ = lazy_namespace(__name__, __file__)
