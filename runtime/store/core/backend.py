"""What both backends' ``StoreBackend`` objects share: every store written once in the core, made on
the backend's ``Executor``. A backend subclasses it with what stays its own: its database, its run store
where it has more to do than the core's (PostgreSQL's ``watch`` and step commits), and its keyword index."""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from runtime.store.core.access import CoreAuditStore, CoreOpsStore, CoreTokenStore
from runtime.store.core.artifacts import CoreArtifactStore
from runtime.store.core.memory import CoreMemoryStore, Recall
from runtime.store.core.runs import CoreRunQueue, CoreRunStore
from runtime.store.core.schedules import CoreScheduleStore
from runtime.store.core.sessions import CoreSessionStore
from runtime.store.core.statements import Executor
from runtime.store.core.webhooks import CoreWebhookStore
from runtime.store.url import StoreURL


class Database(Protocol):
    async def close(self) -> None: ...


D = TypeVar("D", bound=Database)


class CoreBackend(Generic[D]):
    """An open store: ``url``, its database ``db``, the ``ex`` that runs core operations on it, and the stores."""

    run_store: type[CoreRunStore] = CoreRunStore

    def __init__(self, url: StoreURL, db: D, ex: Executor, recall: Recall) -> None:
        self.url, self.db, self.ex = url, db, ex
        self._recall = recall  # the backend's keyword index (FTS5, or PostgreSQL's BM25 tables)

    def sessions(self, tenant: str, project: str) -> CoreSessionStore:
        return CoreSessionStore(self.ex, tenant, project)

    def runs(self, tenant: str, project: str) -> CoreRunStore:
        return self.run_store(self.ex, tenant, project)

    def queue(self) -> CoreRunQueue[None]:
        return CoreRunQueue(self.ex, None)

    async def close(self) -> None:
        await self.db.close()

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


if TYPE_CHECKING:  # mypy holds both backends to the protocol the runtime types them by
    from runtime.backend import StoreBackend

    def _conforms(backend: CoreBackend[Database]) -> StoreBackend:
        return backend
