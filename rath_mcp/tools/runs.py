"""Durable-run tools: workflows, runs, events, interrupts, effects, and ``delegate``.

``run_start``, ``run_wait`` and ``delegate`` never block past their budget (capped at 50 s): they
return the run summary (a handle) when the budget runs out, with progress notifications while
they wait, and ask a human through the client when the run parks on an interrupt.
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, InputRequiredResult, TextContent
from pydantic import Field

from rath_mcp.errors import translate_tool
from rath_mcp.models import MAX_INDEX, JsonValue, WireModel
from rath_mcp.tools.arguments import (
    ID_CHARS,
    INSIDE,
    NAME_CHARS,
    DeadlineS,
    EffectId,
    IdempotencyKey,
    InterruptId,
    JsonArgument,
    JsonObject,
    OptionalText,
    Priority,
    Reason,
    RunCursor,
    RunId,
    RunStatus,
    Text,
    TimeoutS,
    WaitS,
    WorkflowName,
)
from rath_mcp.tools.artifacts import kept_if_large, resource_link
from rath_mcp.tools.sessions import READ_ONLY, WRITES
from rath_mcp.waiting import RunWaiter, actor_of, cap
from runtime import InvalidInputError, Runtime
from runtime.durable.models import TERMINAL, Run
from runtime.durable.store_shared import Scope


class ForkedFrom(WireModel):
    """The checkpoint a forked run started from."""

    run_id: str
    checkpoint_seq: int


TRACE_URL_VARIABLE = "RATH_TRACE_URL"


class Notification(WireModel):
    """A run's latest notification to its notify_url, and how its last try went."""

    webhook_id: str = Field(description="the webhook-id header: the same on every try")
    event: str = Field(description="run.waiting, run.needs_review, run.succeeded, run.failed, ...")
    status: str = Field(description="pending (to be tried), delivered (a 2xx), gone (a 410), failed (24 h of failures)")
    attempts: int
    code: int | None = Field(description="the HTTP status of the last try; null: none yet, or no answer")
    at: float | None = Field(description="when the last try was made")
    error: str | None = Field(description="what went wrong with the last try")
    next_at: float | None = Field(description="when the next try is due (pending only)")


class RunSummary(WireModel):
    """The CONTRACT run summary, plus a hint for what to do next (the one definition of its wire shape)."""

    run_id: str
    workflow: str
    status: str
    step: str | None
    session_id: str | None
    output_session_id: str | None
    result: Annotated[
        JsonValue, Field(description="what the run produced (the workflow's result); null until it succeeds")
    ]
    error: str | None
    pending_interrupts: list[dict[str, Any]]
    forked_from: ForkedFrom | None = Field(description="the checkpoint this run was forked from; null if not a fork")
    schedule_id: str | None = Field(default=None, description="the schedule whose tick started this run; null if none")
    priority: int = Field(default=0, description="higher runs are claimed first (-100..100)")
    trace_id: str | None = Field(
        default=None, description="the OpenTelemetry trace its spans are in (32 hex digits); null: not traced"
    )
    trace_url: str | None = Field(
        default=None, description="where to see that trace (the server's RATH_TRACE_URL with the id); null: not set"
    )
    created_at: float
    updated_at: float
    hint: str | None = Field(default=None, description="what to do next, in words")
    notify: Notification | None = Field(
        default=None, description="run_get: the latest notification to the run's notify_url; null: none"
    )

    @classmethod
    def of(cls, run: Run, rt: Runtime) -> RunSummary:
        return cls(**run.summary(), trace_url=trace_url(run.trace_id), hint=hint_for(run, rt))


def trace_url(trace_id: str | None) -> str | None:
    """The link to a trace in the team's trace UI: ``$RATH_TRACE_URL`` (a template such as
    ``http://jaeger:16686/trace/{trace_id}``) with the id put in; None without either."""
    template = os.environ.get(TRACE_URL_VARIABLE, "").strip()
    if not trace_id or not template:
        return None
    return template.replace("{trace_id}", trace_id) if "{trace_id}" in template else template + trace_id


def hint_for(run: Run, rt: Runtime) -> str | None:
    """What to do next about ``run``, as seen from this server (``rt``): None once it is finished."""
    if run.status in TERMINAL:
        return None
    if run.status == "waiting" and run.pending_interrupts:
        first = run.pending_interrupts[0]
        return f"waiting on a human: decide {first.id} with interrupt_resolve (action approve/reject/edit/respond)"
    if run.status == "needs_review":
        return "an effect's outcome is unknown: inspect effect_list and settle it with effect_resolve"
    wait = f"call run_wait with run_id={run.id}"
    if run.status != "running" and rt.worker_slots == 0:  # nothing here will ever pick it up
        return (
            f"still {run.status}, and this server drives no runs (it was started with --workers 0): "
            f"a `rath-mcp worker` on the same store runs it; {wait} to wait for that"
        )
    return f"still {run.status}: {wait} to keep waiting"


class WorkflowList(WireModel):
    workflows: list[dict[str, Any]] = Field(description="name, description, input_schema and steps of each")


class RunList(WireModel):
    runs: list[RunSummary]
    next_cursor: str | None


class EventPage(WireModel):
    run_id: str
    events: list[dict[str, Any]] = Field(
        description="empty when the page is over 256 KB: it is then the artifact at uri"
    )
    next_after_seq: int = Field(description="pass as after_seq to read on")
    artifact_id: str | None = Field(default=None, description="the artifact holding a page over 256 KB (JSON)")
    uri: str | None = Field(default=None, description="rath://artifacts/{artifact_id}, for a page over 256 KB")
    preview: str | None = Field(default=None, description="the start of a page over 256 KB")


class InterruptList(WireModel):
    interrupts: list[dict[str, Any]]


class EffectList(WireModel):
    effects: list[dict[str, Any]]


class Delegation(WireModel):
    """What ``delegate`` hands back: the answer when the run finished, the handle otherwise."""

    answer: str | None = Field(description="the final assistant message; null while the run is not finished")
    result: Annotated[
        JsonValue, Field(description="what the run produced (the workflow's result); null until it succeeds")
    ]
    run_id: str
    session_id: str | None = Field(description="the run's output session (its input session until it has one)")
    status: str
    error: str | None
    pending_interrupts: list[dict[str, Any]]
    hint: str | None

    @classmethod
    async def of(cls, rt: Runtime, run: Run) -> Delegation:
        """What ``delegate`` (and a delegate task) hands back for this run: the one place it is made."""
        return cls(
            answer=await answer_of(rt, run),
            result=run.result,
            run_id=run.id,
            session_id=run.output_session_id or run.session_id,
            status=run.status,
            error=run.error,
            pending_interrupts=[i.public() for i in run.pending_interrupts],
            hint=hint_for(run, rt),
        )


async def answer_of(rt: Runtime, run: Run) -> str | None:
    """The last assistant message of a finished run's output session."""
    if run.status != "succeeded" or run.output_session_id is None:
        return None
    info = await rt.sessions.info(run.output_session_id)
    tail = await rt.sessions.chunks(run.output_session_id, max(0, info.length - 20))
    for chunk in reversed(tail):
        if chunk.kind == "assistant" and chunk.content:
            return chunk.content
    return None


def register(server: MCPServer, rt: Runtime, waiter: RunWaiter) -> None:
    """Add the workflow/run/interrupt/effect tools and ``delegate`` to ``server``."""

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def workflow_list() -> WorkflowList:
        """The workflows this server can run: name, description, input schema and steps."""
        return WorkflowList(workflows=rt.workflows.describe())

    @server.tool(annotations=WRITES)
    @translate_tool
    async def run_start(
        workflow: WorkflowName,
        ctx: Context,
        session_id: Annotated[str | None, Field(max_length=ID_CHARS, description="input session, ses_…")] = None,
        message: Annotated[
            OptionalText, Field(description="a user message: starts a new session, or is appended")
        ] = None,
        input: Annotated[JsonObject, Field(description="the workflow's input (see workflow_list)" + INSIDE)] = None,
        idempotency_key: IdempotencyKey = None,
        deadline_s: DeadlineS = None,
        priority: Priority = 0,
        notify_url: Annotated[
            str | None,
            Field(max_length=2048, description="an https URL POSTed the signed run summary when it waits or ends"),
        ] = None,
        wait_s: WaitS = 0,
    ) -> RunSummary | InputRequiredResult:
        """Start a durable run of a workflow; waits up to wait_s for it to settle, else returns the handle."""
        run_id = waiter.resumed_run_id(ctx)
        if run_id is None:
            started = await rt.runs.submit(
                workflow,
                session_id=session_id,
                message=message,
                input=input,
                idempotency_key=idempotency_key,
                deadline_s=deadline_s,
                priority=priority,
                notify_url=notify_url,
            )
            run_id = started.id
        return summary_of(await waiter.wait(ctx, run_id, cap(wait_s)), rt)

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def run_get(run_id: RunId) -> RunSummary:
        """A run's summary, with its pending interrupts and its latest notification (notify)."""
        run = await rt.runs.get(run_id)
        last = await rt.webhooks.last(Scope(run.tenant, run.project), run.id)
        return RunSummary.of(run, rt).model_copy(update={"notify": Notification(**last) if last else None})

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def run_wait(run_id: RunId, ctx: Context, timeout_s: TimeoutS = 25) -> RunSummary | InputRequiredResult:
        """Wait (at most timeout_s, capped at 50) until the run is finished, waiting on a human, or still going."""
        return summary_of(await waiter.wait(ctx, run_id, cap(timeout_s)), rt)

    @server.tool(annotations=WRITES)
    @translate_tool
    async def run_cancel(run_id: RunId, reason: Reason = None) -> RunSummary:
        """Cancel a run (a running step is stopped). Cancelling a finished run changes nothing."""
        return RunSummary.of(await rt.runs.cancel(run_id, reason), rt)

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def run_list(
        status: RunStatus | None = None,
        workflow: Annotated[str | None, Field(max_length=NAME_CHARS, description="a workflow's name")] = None,
        cursor: RunCursor = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> RunList:
        """Runs, newest first, optionally of one status or workflow."""
        runs, next_cursor = await rt.runs.list(status=status, workflow=workflow, cursor=cursor, limit=limit)
        return RunList(runs=[RunSummary.of(r, rt) for r in runs], next_cursor=next_cursor)

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def run_events(
        run_id: RunId,
        after_seq: Annotated[int, Field(ge=0, le=MAX_INDEX)] = 0,
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    ) -> Annotated[CallToolResult, EventPage]:
        """A run's events in order, after a sequence number (a page over 256 KB comes as a resource_link)."""
        events = await rt.runs.events(run_id, after_seq, limit)
        last = events[-1].seq if events else after_seq
        page = EventPage(run_id=run_id, events=[e.model_dump(mode="json") for e in events], next_after_seq=last)
        text = json.dumps(page.events, ensure_ascii=False)
        kept = await kept_if_large(
            rt, text, f"{run_id}-events-{after_seq + 1}-{last}.json", "application/json", run_id=run_id
        )
        if kept is None:
            return CallToolResult(
                content=[TextContent(text=page.model_dump_json(exclude_none=True))],
                structured_content=page.model_dump(mode="json", exclude_none=True),
            )
        artifact, preview = kept
        linked = EventPage(
            run_id=run_id, events=[], next_after_seq=last, artifact_id=artifact.id, uri=artifact.uri, preview=preview
        )
        return CallToolResult(
            content=[TextContent(text=linked.model_dump_json()), resource_link(artifact)],
            structured_content=linked.model_dump(mode="json"),
        )

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def interrupt_list(
        run_id: Annotated[str | None, Field(max_length=ID_CHARS, description="a run id, run_…")] = None,
    ) -> InterruptList:
        """Pending interrupts (of one run, or of all runs), oldest first."""
        return InterruptList(interrupts=[i.public() for i in await rt.runs.interrupts(run_id)])

    @server.tool(annotations=WRITES)
    @translate_tool
    async def interrupt_resolve(
        interrupt_id: InterruptId,
        ctx: Context,
        action: Literal["approve", "edit", "reject", "respond"],
        value: Annotated[JsonArgument, Field(description="the answer (edit/respond): any JSON value" + INSIDE)] = None,
        reason: Reason = None,
    ) -> RunSummary:
        """Decide a pending interrupt; its run is queued to resume."""
        return RunSummary.of(
            await rt.runs.resolve_interrupt(interrupt_id, action, value, reason, actor=actor_of(ctx, "mcp-client")), rt
        )

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def effect_list(
        status: Literal["prepared", "dispatched", "succeeded", "failed", "ambiguous"] = "ambiguous",
    ) -> EffectList:
        """Entries of the effect ledger with a status (ambiguous ones need a human)."""
        return EffectList(effects=[e.public() for e in await rt.runs.effects(status)])

    @server.tool(annotations=WRITES)
    @translate_tool
    async def effect_resolve(
        effect_id: EffectId,
        outcome: Literal["applied", "not_applied"],
        result: Annotated[JsonArgument, Field(description="what the effect returned, when applied" + INSIDE)] = None,
    ) -> RunSummary:
        """Settle an ambiguous effect: applied (with its result) or not_applied (it will run again)."""
        return RunSummary.of(await rt.runs.resolve_effect(effect_id, outcome, result), rt)

    @server.tool(annotations=WRITES)
    @translate_tool
    async def delegate(
        task: Annotated[Text, Field(description="what should be done, in words")],
        ctx: Context,
        workflow: WorkflowName = "agent",
        wait_s: WaitS = 25,
        idempotency_key: Annotated[
            IdempotencyKey, Field(description="the same task and key return the same run")
        ] = None,
    ) -> Delegation | InputRequiredResult:
        """Hand a task to a workflow in one call: returns the final answer, or a run handle if it takes longer."""
        run_id = waiter.resumed_run_id(ctx)
        if run_id is None:
            if not task.strip():
                raise InvalidInputError("task is empty: say what should be done")
            run_id = (await rt.runs.submit(workflow, message=task, idempotency_key=idempotency_key)).id
        outcome = await waiter.wait(ctx, run_id, cap(wait_s))
        if isinstance(outcome, InputRequiredResult):
            return outcome
        return await Delegation.of(rt, outcome)


def summary_of(outcome: Run | InputRequiredResult, rt: Runtime) -> RunSummary | InputRequiredResult:
    """A waited-on run as its summary (or the question the client is asked first)."""
    return outcome if isinstance(outcome, InputRequiredResult) else RunSummary.of(outcome, rt)
