"""Sessions: immutable snapshots of ordered chunks, with placement, usage and a lineage DAG.

Every name is imported on first use (``runtime.lazy``).
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_namespace

if TYPE_CHECKING:  # the public names, one import each: lazy_namespace reads them (see runtime.lazy)
    from runtime.sessions.in_memory import InMemoryHome as InMemoryHome
    from runtime.sessions.in_memory import InMemorySessionStore as InMemorySessionStore
    from runtime.sessions.model import Chunk as Chunk
    from runtime.sessions.model import LineageEdge as LineageEdge
    from runtime.sessions.model import LineageGraph as LineageGraph
    from runtime.sessions.model import LineageNode as LineageNode
    from runtime.sessions.model import Placement as Placement
    from runtime.sessions.model import Session as Session
    from runtime.sessions.model import SessionInfo as SessionInfo
    from runtime.sessions.model import ToolCall as ToolCall
    from runtime.sessions.model import ToolCallFunction as ToolCallFunction
    from runtime.sessions.model import Usage as Usage
    from runtime.sessions.service import SessionService as SessionService
    from runtime.sessions.store import SessionStore as SessionStore

__getattr__, __dir__, __all__ = lazy_namespace(__name__, __file__)
