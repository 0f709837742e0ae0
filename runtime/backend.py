"""``StoreBackend``: what ``Runtime`` needs from an open store backend, typed by the layers' protocols.

``runtime.store`` opens a backend from a URL without knowing the layers; this is the one place,
above every layer, that says what the opened object must give: each layer's store for a
tenant/project, the run queue across all of them (``queue``), the operator's reads of the whole
store (``ops``), and ``close``.
"""

from __future__ import annotations

from typing import Protocol

from runtime.access.store import AuditStore, TokenStore
from runtime.artifacts.model import ArtifactRecords
from runtime.durable.store import RunQueue, RunStore
from runtime.memory.store import MemoryStore
from runtime.schedules.store import ScheduleStore
from runtime.sessions.store import SessionStore
from runtime.store import StoreURL
from runtime.webhooks.store import WebhookStore


class OpsStore(Protocol):
    """What health checks and ``/metrics`` read: the whole store, across every tenant and project."""

    async def ping(self) -> None:
        """Return once the store answers a query; raise ``StoreError`` when it does not."""

    async def run_counts(self) -> dict[str, int]:
        """How many runs there are in each status, across every tenant and project."""

    async def step_durations(self, after: float, limit: int) -> list[tuple[float, str, float]]:
        """Steps completed after ``after`` (oldest first, at most ``limit``): ``(completed_at,
        workflow, seconds since the step started)``."""


class StoreBackend(Protocol):
    url: StoreURL

    def sessions(self, tenant: str, project: str) -> SessionStore: ...
    def runs(self, tenant: str, project: str) -> RunStore: ...
    def memory(self, tenant: str, project: str) -> MemoryStore: ...
    def artifacts(self, tenant: str, project: str) -> ArtifactRecords: ...
    def queue(self) -> RunQueue:
        """The runs of every tenant/project, as one worker serving them all claims and reaps them."""
        ...

    def schedules(self) -> ScheduleStore:
        """The schedules of every tenant/project (the ticker fires them all)."""
        ...

    def webhooks(self) -> WebhookStore:
        """Run notifications of every tenant/project (any server or worker sends them)."""
        ...

    def tokens(self) -> TokenStore: ...
    def audit(self) -> AuditStore: ...
    def ops(self) -> OpsStore: ...
    async def close(self) -> None: ...
