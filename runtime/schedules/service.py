"""``rt.schedules``: create, list, pause, change and delete the schedules of one tenant/project.

Everything is checked before anything is written (the cron, the time zone, the catch-up policy, the
workflow and its input, through the same checks ``run_start`` makes), so a refused schedule leaves
nothing behind. ``next_at`` is always the next tick after the ticker's clock when the schedule was
made, resumed or given a new cron: the time it was paused is not caught up.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from runtime.durable.store_shared import Scope
from runtime.errors import InvalidInputError
from runtime.ids import new_id
from runtime.schedules.cron import check_cron, check_timezone, next_tick
from runtime.schedules.store import Schedule, ScheduleStore

if TYPE_CHECKING:
    from runtime.durable.service import RunService
    from runtime.schedules.ticker import Ticker

#: What a schedule does with the ticks it missed while no server ran: fire none, the latest, or all.
CATCH_UP: Final = ("latest", "none", "all")
MAX_NAME = 200
MAX_LIST = 1000


def summary(row: Schedule) -> dict[str, Any]:
    """A schedule as the tools show it."""
    return {
        "schedule_id": row["id"],
        "name": row["name"],
        "workflow": row["workflow"],
        "cron": row["cron"],
        "timezone": row["timezone"],
        "catch_up": row["catch_up"],
        "input": json.loads(row["input"]) if row["input"] else {},
        "message": row["message"],
        "paused": bool(row["paused"]),
        "next_at": float(row["next_at"]),
        "last_tick": None if row["last_tick"] is None else float(row["last_tick"]),
        "created_at": float(row["created_at"]),
    }


class ScheduleService:
    """The schedules of one tenant/project; ``runs`` is that scope's ``RunService`` (its start checks)."""

    def __init__(self, store: ScheduleStore, scope: Scope, runs: RunService, ticker: Ticker) -> None:
        self.store = store
        self.scope = scope
        self.runs = runs
        self.ticker = ticker

    async def create(
        self,
        workflow: str,
        cron: str,
        *,
        input: dict[str, Any] | None = None,
        message: str | None = None,
        timezone: str = "UTC",
        catch_up: str = "latest",
        name: str | None = None,
    ) -> dict[str, Any]:
        expr = check_cron(cron)
        check_timezone(timezone)
        if catch_up not in CATCH_UP:
            raise InvalidInputError(f"catch_up must be one of {', '.join(CATCH_UP)}, got {catch_up!r}")
        if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME):
            raise InvalidInputError(f"name must be text of at most {MAX_NAME} characters")
        if message is not None and not isinstance(message, str):
            raise InvalidInputError(f"message must be text, got {type(message).__name__}")
        await self.runs.check_start(workflow, input=input)  # unknown workflow, input failing its schema
        await self.runs.engine.notify_target(workflow, None)  # the workflow's notify_url, if it names one
        fields = {
            "id": new_id("sch"),
            "name": name,
            "workflow": workflow,
            "cron": expr,
            "timezone": timezone,
            "catch_up": catch_up,
            "input": dict(input or {}),
            "message": message,
            "next_at": next_tick(expr, timezone, self.ticker.clock()),
        }
        row = await self.store.create(self.scope, fields)
        self.ticker.wake()
        return summary(row)

    async def get(self, schedule_id: str) -> dict[str, Any]:
        return summary(await self.store.get(self.scope, schedule_id))

    async def list(self, limit: int = MAX_LIST) -> list[dict[str, Any]]:
        return [summary(row) for row in await self.store.in_scope(self.scope, limit)]

    async def update(self, schedule_id: str, *, paused: bool | None = None, cron: str | None = None) -> dict[str, Any]:
        """Pause or resume, and/or change the cron; resuming or a new cron starts from the next tick from now."""
        if paused is not None and not isinstance(paused, bool):
            raise InvalidInputError(f"paused must be true or false, got {paused!r}")
        row = await self.store.get(self.scope, schedule_id)
        sets: dict[str, Any] = {}
        expr = row["cron"] if cron is None else check_cron(cron)
        if cron is not None:
            sets["cron"] = expr
        if paused is not None:
            sets["paused"] = int(paused)
        if cron is not None or (paused is False and row["paused"]):
            sets["next_at"] = next_tick(expr, row["timezone"], self.ticker.clock())
        if not sets:
            return summary(row)
        updated = await self.store.update(self.scope, schedule_id, sets)
        self.ticker.wake()
        return summary(updated)

    async def delete(self, schedule_id: str) -> None:
        await self.store.delete(self.scope, schedule_id)
