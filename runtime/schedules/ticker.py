"""``Ticker``: fires the schedules that are due, in every tenant/project of the store.

Every server on a store runs one; which of them fires a tick does not matter, since a tick's run is
created in the transaction that takes the tick's key (``runtime.store.core.schedules.fire``). The
ticker has a clock of its own (``clock``, UNIX seconds; tests inject one), so ticks are decided by it
alone; runs it creates are stamped and claimed on the store's clock as any other.

Catch-up, when a schedule's next tick is found already past (the servers were down, or the clock
jumped): ``all`` fires every missed tick (the latest ``MAX_CATCH_UP``), ``latest`` the last one only,
``none`` only a tick at most ``LATE_S`` late (one a running ticker reaches in time).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

from runtime.durable.registry import WorkflowRegistry
from runtime.durable.store import NewRun, dumps
from runtime.periodic import Periodic
from runtime.schedules.cron import due_ticks, next_tick
from runtime.schedules.store import Schedule, ScheduleStore, Tick
from runtime.sessions.inputs import as_chunks, fresh
from runtime.sessions.model import Placement, Usage
from runtime.sessions.store import NewSession

log = logging.getLogger(__name__)

MAX_CATCH_UP = 100
"""``catch_up="all"`` fires at most this many missed ticks of one schedule (the latest)."""
LATE_S = 60.0
"""A tick found later than this is missed (``catch_up="none"`` skips it)."""
BATCH = 100
"""Schedules fired per look at the store."""


class Ticker:
    def __init__(
        self,
        store: ScheduleStore,
        workflows: WorkflowRegistry,
        wake_workers: Callable[[], None],
        *,
        clock: Callable[[], float] = time.time,
        interval_s: float = 1.0,
    ) -> None:
        self.store = store
        self.workflows = workflows
        self.wake_workers = wake_workers
        self.clock = clock
        failed = "could not fire the schedules that are due"
        self.periodic = Periodic(self._look, interval_s, failed=failed, log=log)

    def wake(self) -> None:
        """A schedule was made or changed: look now."""
        self.periodic.wake()

    async def run(self) -> None:
        """Fire what is due, then look again every ``interval_s`` (or when woken); until cancelled."""
        await self.periodic.run()

    async def _look(self) -> bool:
        await self.fire_due()
        return False  # the next look after the interval, or when woken

    async def fire_due(self) -> list[str]:
        """Fire every schedule due at the clock's time now; the runs this call created."""
        at = self.clock()
        made: list[str] = []
        for row in await self.store.due(at, BATCH):
            if row["workflow"] not in self.workflows:
                continue  # a workflow this server does not have: another server's to fire
            made += await self._fire(row, at)
        if made:
            self.wake_workers()
        return made

    async def _fire(self, row: Schedule, at: float) -> list[str]:
        cron, zone, first = row["cron"], row["timezone"], float(row["next_at"])
        missed = due_ticks(cron, zone, first, at, MAX_CATCH_UP)
        policy = row["catch_up"]
        if policy == "latest":
            missed = missed[-1:]
        elif policy == "none":
            missed = [t for t in missed[-1:] if at - t <= LATE_S]
        try:
            ticks = [self._tick(row, t) for t in missed]
        except Exception as exc:  # the workflow changed under the schedule: its ticks are skipped, said once each
            log.warning("schedule %s skips %d tick(s): %s", row["id"], len(missed), exc)
            ticks = []
        return await self.store.fire(row["id"], first, ticks, next_tick(cron, zone, at))

    def _tick(self, row: Schedule, at: float) -> Tick:
        plan = self.workflows.get(row["workflow"])
        payload = json.loads(row["input"]) if row["input"] else {}
        run = NewRun(
            workflow=row["workflow"],
            plan_hash=plan.plan_hash,
            step=plan.entry,
            input_json=dumps(payload),
            concurrency_key=plan.run_key(payload),
            notify_url=plan.notify_url,  # the workflow's own (checked again each time it is sent)
        )
        session = None
        if row["message"] is not None:
            chunks = fresh(as_chunks([{"kind": "user", "content": row["message"]}]))
            session = NewSession(
                op="create", parents=(), chunks=chunks, placement=Placement(), usage=Usage(), metadata={}
            )
        return Tick(int(at), run, session)
