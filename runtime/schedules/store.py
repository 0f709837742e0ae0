"""``ScheduleStore``: what the schedules layer needs of a store (``runtime/store/core/schedules.py`` is it).

A schedule is a dict of its columns (``id``, ``tenant``, ``project``, ``name``, ``workflow``, ``cron``,
``timezone``, ``catch_up``, ``input`` (JSON text), ``message``, ``paused``, ``next_at``, ``last_tick``,
``created_at``, ``updated_at``). ``fire`` is the once-only step: see its docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.durable.store import NewRun
from runtime.durable.store_shared import Scope
from runtime.sessions.store import NewSession

Schedule = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Tick:
    """One tick to fire: its time (UNIX seconds), the run it makes, and that run's new input session, if any."""

    at: int
    run: NewRun
    session: NewSession | None = None


class ScheduleStore(Protocol):
    """Schedules of every tenant/project: each call names its scope, except the ticker's, which span them all."""

    async def create(self, scope: Scope, fields: dict[str, Any]) -> Schedule: ...
    async def get(self, scope: Scope, schedule_id: str) -> Schedule: ...
    async def in_scope(self, scope: Scope, limit: int) -> list[Schedule]: ...
    async def update(self, scope: Scope, schedule_id: str, sets: dict[str, Any]) -> Schedule: ...
    async def delete(self, scope: Scope, schedule_id: str) -> None: ...
    async def due(self, at: float, limit: int) -> list[Schedule]:
        """Schedules not paused whose next tick is at or before ``at``, earliest first."""
        ...

    async def fire(self, schedule_id: str, expected: float, ticks: Sequence[Tick], next_at: float) -> list[str]:
        """In one transaction: if the schedule's next tick is still ``expected``, take each tick's key
        ``(schedule_id, tick)`` and, where it was free, create its run; move the schedule to ``next_at``.
        The runs made (none where another firer was first)."""
        ...
