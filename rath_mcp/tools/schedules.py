"""Scheduled runs (CONTRACT §15): ``schedule_create``, ``schedule_list``, ``schedule_update``, ``schedule_delete``.

Thin: ``rt.schedules`` (``runtime.schedules``) checks and writes; the ticker of every server on the
store fires the ticks, each exactly once.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from pydantic import Field

from rath_mcp.errors import translate_tool
from rath_mcp.models import WireModel
from rath_mcp.tools.arguments import ID_CHARS, INSIDE, NAME_CHARS, JsonObject, OptionalText, WorkflowName
from rath_mcp.tools.sessions import READ_ONLY, WRITES
from runtime import Runtime

ScheduleId = Annotated[str, Field(min_length=1, max_length=ID_CHARS, description="a schedule id, sch_…")]
Cron = Annotated[
    str, Field(min_length=1, max_length=NAME_CHARS, description="five cron fields: minute hour day month weekday")
]


class Schedule(WireModel):
    schedule_id: str
    name: str | None
    workflow: str
    cron: str
    timezone: str
    catch_up: str
    input: dict[str, Any]
    message: str | None
    paused: bool
    next_at: float = Field(description="UNIX time of the next tick")
    last_tick: float | None = Field(description="UNIX time of the last tick fired; null before the first")
    created_at: float


class ScheduleList(WireModel):
    schedules: list[Schedule]


class Deleted(WireModel):
    schedule_id: str
    deleted: bool


def register(server: MCPServer, rt: Runtime) -> None:
    """Add the schedule tools to ``server``."""

    @server.tool(annotations=WRITES)
    @translate_tool
    async def schedule_create(
        workflow: WorkflowName,
        cron: Cron,
        input: Annotated[JsonObject, Field(description="the input of every run it starts" + INSIDE)] = None,
        message: Annotated[OptionalText, Field(description="a user message each run starts a new session with")] = None,
        timezone: Annotated[str, Field(min_length=1, max_length=NAME_CHARS, description="an IANA zone")] = "UTC",
        catch_up: Literal["latest", "none", "all"] = "latest",
        name: Annotated[str | None, Field(max_length=NAME_CHARS)] = None,
    ) -> Schedule:
        """Start a run of a workflow at every tick of a cron expression in a time zone (each tick exactly once,
        whatever the number of servers). catch_up: what to fire for ticks missed while no server ran."""
        made = await rt.schedules.create(
            workflow, cron, input=input, message=message, timezone=timezone, catch_up=catch_up, name=name
        )
        return Schedule(**made)

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def schedule_list() -> ScheduleList:
        """This project's schedules, oldest first."""
        return ScheduleList(schedules=[Schedule(**s) for s in await rt.schedules.list()])

    @server.tool(annotations=WRITES)
    @translate_tool
    async def schedule_update(
        schedule_id: ScheduleId, paused: bool | None = None, cron: Cron | None = None
    ) -> Schedule:
        """Pause or resume a schedule and/or give it a new cron (it goes on from the next tick from now)."""
        return Schedule(**await rt.schedules.update(schedule_id, paused=paused, cron=cron))

    @server.tool(annotations=WRITES)
    @translate_tool
    async def schedule_delete(schedule_id: ScheduleId) -> Deleted:
        """Delete a schedule: it fires no more (runs it started stay)."""
        await rt.schedules.delete(schedule_id)
        return Deleted(schedule_id=schedule_id, deleted=True)
