"""What both backends' ``StoreBackend`` objects share: every store written once in the core, made on
the backend's ``Executor``. A backend subclasses it with what stays its own (its database, the
session and run stores whose commits it drives itself, its keyword index, and how it closes)."""

from __future__ import annotations

from runtime.store.core.access import CoreAuditStore, CoreOpsStore, CoreTokenStore
from runtime.store.core.artifacts import CoreArtifactStore
from runtime.store.core.memory import CoreMemoryStore, Recall
from runtime.store.core.schedules import CoreScheduleStore
from runtime.store.core.statements import Executor
from runtime.store.core.webhooks import CoreWebhookStore
from runtime.store.url import StoreURL


class CoreBackend:
    """An open store: ``url``, the ``ex`` that runs core operations on it, and the core's stores."""

    def __init__(self, url: StoreURL, ex: Executor, recall: Recall) -> None:
        self.url = url
        self.ex = ex
        self._recall = recall  # the backend's keyword index (FTS5, or PostgreSQL's BM25 tables)

    def memory(self, tenant: str, project: str) -> CoreMemoryStore:
        return CoreMemoryStore(self.ex, self._recall, tenant, project)

    def artifacts(self, tenant: str, project: str) -> CoreArtifactStore:
        return CoreArtifactStore(self.ex, tenant, project)

    def schedules(self) -> CoreScheduleStore:
        return CoreScheduleStore(self.ex)

    def webhooks(self) -> CoreWebhookStore:
        return CoreWebhookStore(self.ex)

    def tokens(self) -> CoreTokenStore:
        return CoreTokenStore(self.ex)

    def audit(self) -> CoreAuditStore:
        return CoreAuditStore(self.ex)

    def ops(self) -> CoreOpsStore:
        return CoreOpsStore(self.ex)
