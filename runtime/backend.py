"""``StoreBackend``: what ``Runtime`` needs from an open store backend, typed by the layers' protocols.

``runtime.store`` opens a backend from a URL without knowing the layers; this is the one place,
above every layer, that says what the opened object must give: each layer's store for a
tenant/project, the run queue across all of them (``queue``), and ``close``.
"""

from __future__ import annotations

from typing import Protocol

from runtime.access.store import AuditStore, OpsStore, TokenStore
from runtime.durable.store import RunQueue, RunStore
from runtime.memory.store import MemoryStore
from runtime.sessions.store import SessionStore
from runtime.store import StoreURL


class StoreBackend(Protocol):
    url: StoreURL

    def sessions(self, tenant: str, project: str) -> SessionStore: ...
    def runs(self, tenant: str, project: str) -> RunStore: ...
    def memory(self, tenant: str, project: str) -> MemoryStore: ...
    def queue(self) -> RunQueue:
        """The runs of every tenant/project, as one worker serving them all claims and reaps them."""
        ...

    def tokens(self) -> TokenStore: ...
    def audit(self) -> AuditStore: ...
    def ops(self) -> OpsStore: ...
    async def close(self) -> None: ...
