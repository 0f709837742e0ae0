"""``Engine``: everything the durable engine needs, handed down once by the runtime that owns it.

The runtime builds one ``Engine`` when it opens and gives it to its ``RunService`` of every scope and to
its workers; a worker gives it to each ``Runner``, a runner to each step's context. Nothing in
``runtime/durable`` reaches back up for the store, the signals or the timings: they are here.

Following one run: ``RunService.submit`` (``service.py``) writes it through the scope's ``RunStore``
(``store.py``) and wakes the workers; a ``Worker`` (``worker.py``) claims it through ``queue`` and
hands it to a ``Runner`` (``runner.py``), which drives its steps, each with a ``LiveContext``
(``context.py``, the effect ledger), and makes each step's commit through ``CommitLine`` (``held.py``)
into the run's own ``RunStore``: one file per backend implements that (``runtime/store/*/runs.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from runtime.durable.registry import WorkflowRegistry
from runtime.durable.store import RunQueue, RunStore
from runtime.errors import InvalidInputError
from runtime.flow.services import Services
from runtime.telemetry import Tracing

POLL_S = 0.25
"""Seconds between fallback polls of the store, where no notification tells of a change."""


class WorkerSignals(Protocol):
    """What the engine tells a worker of this process (``worker.Worker`` is one)."""

    def wake(self) -> None: ...
    def cancel_asked(self, run_ids: Sequence[str]) -> None: ...
    def cancel_local(self, run_id: str, reason: str | None) -> None: ...


@dataclass(eq=False)
class Engine:
    """The durable engine's own state and what it is given: stores, workflows, signals and timings.

    ``runs``: the ``RunStore`` of the scope the runtime was opened in; its scope-free operations
    (``renew``, ``cancel_requests``, ``release``: by run id and token) serve the runs of every scope.
    ``stores(tenant, project)``: the ``RunStore`` of a run's own scope (what its commits go through).
    ``queue``: the store's ``RunQueue``, serving every scope (claims, takeover, reaping).
    ``services``: what a step sees as ``ctx.runtime``; ``scope(tenant, project)`` enters a run's scope
    while it is driven, so that those services are the run's own.
    ``waiters`` and ``workers`` are this process's, shared by every scope.
    """

    runs: RunStore
    stores: Callable[[str, str], RunStore]
    queue: RunQueue
    workflows: WorkflowRegistry
    services: Services
    scope: Callable[[str, str], AbstractContextManager[Any]]
    lease_s: float = 30.0
    poll_s: float = POLL_S
    worker_slots: int = 0
    """Runs this process drives at once; 0: none (worker processes on the same store do)."""
    max_queued: int | None = 1000
    """A run start is refused when its tenant/project has this many queued runs (None: no limit)."""
    check_notify: Callable[[str], Awaitable[None]] | None = None
    """Checks a new run's ``notify_url`` before anything is written (``runtime.webhooks``); None: this
    runtime sends no notifications, and a run asking for one is refused."""
    waiters: dict[str, anyio.Event] = field(default_factory=dict)
    """Local waiters on runs, by run id (ids are unique across scopes)."""
    workers: list[WorkerSignals] = field(default_factory=list)
    """Durable workers of this process, whatever scope their runs are in."""
    tracing: Tracing = field(default_factory=Tracing)
    """Where runs, steps and effects are traced (``runtime.durable.traced``; default: nowhere)."""

    def notify(self, *run_ids: str) -> None:
        """Wake local waiters of these runs (called after every local commit)."""
        for run_id in run_ids:
            event = self.waiters.pop(run_id, None)
            if event is not None:
                event.set()

    async def notify_target(self, workflow: str, given: str | None) -> str | None:
        """The URL a new run of ``workflow`` notifies (``given``, else the workflow's own ``notify_url``),
        checked; None when it notifies nothing."""
        url = given if given is not None else self.workflows.get(workflow).notify_url
        if url is None:
            return None
        if self.check_notify is None:
            raise InvalidInputError("notify_url: this runtime sends no run notifications")
        await self.check_notify(url)
        return url

    def wake_workers(self) -> None:
        """A run became claimable, or a concurrency slot freed: every worker of this process looks now."""
        for worker in self.workers:
            worker.wake()
