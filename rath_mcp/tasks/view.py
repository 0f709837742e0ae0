"""A durable run seen as an MCP task: its status, its words, its timestamps, in either era's shape.

The task id is the run id, so every run of the caller's scope is a task (one started without a
task too); what a client asked for when it created one (which tool, which ttl) is recorded with
the run as a ``task.created`` event, so any server process on the store answers the same way,
after a restart too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from runtime import Runtime
from runtime.durable.models import TERMINAL, Run

#: Run status → task status (the README has this table).
STATUS: Final[dict[str, str]] = {
    "queued": "working",
    "running": "working",
    "waiting": "input_required",
    "needs_review": "input_required",  # a person must settle an effect whose outcome is unknown
    "succeeded": "completed",
    "failed": "failed",
    "timed_out": "failed",
    "cancelled": "cancelled",
}
TASK_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})

CREATED_EVENT: Final = "task.created"
TOOLS: Final = ("run_start", "delegate")
#: How often a client should poll, by task status (ms): a working run changes at every step, a
#: run waiting on a person changes only when someone answers.
POLL_MS: Final[dict[str, int]] = {"working": 1000, "input_required": 5000}
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
#: Events searched for a run's ``task.created`` (it is written right after the run is created).
_CREATED_WITHIN = 50


@dataclass(frozen=True)
class TaskOrigin:
    """What the client asked for when the task was created: the tool, and the ttl it wanted kept."""

    tool: str = "run_start"
    ttl_ms: int | None = None
    progress_token: str | int | None = None


async def origin_of(rt: Runtime, run: Run) -> TaskOrigin:
    """The run's ``task.created`` record; a run started without a task reads as ``run_start``, kept for ever."""
    for event in await rt.runs.events(run.id, 0, _CREATED_WITHIN):
        if event.type == CREATED_EVENT:
            tool = str(event.data.get("tool") or "run_start")
            ttl = event.data.get("ttl_ms")
            token = event.data.get("progress_token")
            return TaskOrigin(
                tool if tool in TOOLS else "run_start",
                ttl if isinstance(ttl, int) else None,
                token if isinstance(token, str | int) else None,
            )
    return TaskOrigin()


def iso(timestamp: float) -> str:
    """An ISO 8601 UTC timestamp, as tasks carry them."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


def status_message(run: Run) -> str:
    """What the run is doing, in words."""
    if run.status == "queued":
        return f"run {run.id} of {run.workflow} is queued" + (f" to run step {run.step}" if run.step else "")
    if run.status == "running":
        return f"run {run.id} of {run.workflow} is running step {run.step}"
    if run.status == "waiting":
        asks = "; ".join(i.prompt or f"{i.kind} {i.id}" for i in run.pending_interrupts)
        return f"run {run.id} waits on a person at step {run.step}: {asks or 'an answer'}"
    if run.status == "needs_review":
        return f"run {run.id} needs review: an effect's outcome is unknown (settle it with effect_resolve)"
    if run.status == "succeeded":
        return f"run {run.id} of {run.workflow} succeeded"
    if run.status == "cancelled":
        return f"run {run.id} was cancelled" + (f": {run.error}" if run.error else "")
    return f"run {run.id} {run.status.replace('_', ' ')}: {run.error or 'no reason recorded'}"


def task_status(run: Run) -> str:
    return STATUS[run.status]


def poll_ms(run: Run) -> int | None:
    return None if run.status in TERMINAL else POLL_MS[task_status(run)]


def _task(run: Run) -> dict[str, Any]:
    """The fields both eras' ``Task`` share."""
    return {
        "taskId": run.id,
        "status": task_status(run),
        "statusMessage": status_message(run),
        "createdAt": iso(run.created_at),
        "lastUpdatedAt": iso(run.updated_at),
    }


def handshake_task(run: Run, origin: TaskOrigin) -> dict[str, Any]:
    """The 2025-11-25 ``Task`` (ttl and pollInterval in milliseconds; ttl null: kept for ever)."""
    task = {**_task(run), "ttl": origin.ttl_ms}
    interval = poll_ms(run)
    if interval is not None:
        task["pollInterval"] = interval
    return task


def extension_task(run: Run) -> dict[str, Any]:
    """The ``io.modelcontextprotocol/tasks`` (SEP-2663) ``Task`` (``ttlMs``, ``pollIntervalMs``): runs are kept
    for ever, so ``ttlMs`` is null."""
    task = {**_task(run), "ttlMs": None}
    interval = poll_ms(run)
    if interval is not None:
        task["pollIntervalMs"] = interval
    return task


def related(task_id: str) -> dict[str, Any]:
    """The ``_meta`` entry tying a message to its task."""
    return {RELATED_TASK: {"taskId": task_id}}
