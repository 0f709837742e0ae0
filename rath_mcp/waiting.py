"""Waiting on a run inside a tool call: bounded, with progress, and asking a human when it can.

No tool blocks past its ``wait_s``/``timeout_s`` (each capped at 50 s, under a host's ~60 s
timeout); while it waits it sends a progress notification on every change of the run and a
heartbeat every few seconds. A client cancelling the call only stops the wait, never the run.

When the run parks on an interrupt while a client waits, the server asks the human through that
client: an elicitation request on handshake-era connections, an ``InputRequiredResult`` on
2026-07-28 (the client answers and retries; ``request_state`` carries the run id). The answer
is recorded as the interrupt's decision and the wait goes on. Clients that cannot elicit get
the pending interrupt in the result and answer with ``interrupt_resolve``.

A 2026-07-28 client that declared sampling also answers the model calls of runs on the
``sampling`` provider while it waits: they come out of the ``SamplingQueue`` as
``sampling/createMessage`` requests in the same ``InputRequiredResult``.
"""

from __future__ import annotations

import json
import logging
from functools import partial
from typing import Any

import anyio
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CreateMessageRequest,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from rath_mcp.agent_text import TextRelay
from rath_mcp.asking import Answer, answer_from, form_for, message_for, request_for
from rath_mcp.logs import level_of, log
from rath_mcp.sampling import ClientSampling, to_params
from rath_mcp.sampling_queue import SamplingQueue
from rath_mcp.wait_clock import LoopClock, WaitClock, before
from runtime import ConflictError, Runtime
from runtime.durable.models import SETTLED, Interrupt, Run
from runtime.providers import ModelRequest

logger = logging.getLogger(__name__)

MAX_WAIT_S = 50.0
HEARTBEAT_S = 5.0


def cap(seconds: float) -> float:
    """A wait budget within [0, 50] s."""
    return max(0.0, min(MAX_WAIT_S, float(seconds)))


def client_can_elicit(ctx: Context) -> bool:
    """Whether the calling client declared form elicitation."""
    caps = ctx.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None  # `{}` means form (2025-06-18 clients)


def client_can_sample(ctx: Context) -> bool:
    """Whether the calling client declared sampling."""
    caps = ctx.client_capabilities
    return caps is not None and caps.sampling is not None


def client_samples_tools(ctx: Context) -> bool:
    """Whether the calling client declared sampling with tools."""
    caps = ctx.client_capabilities
    return caps is not None and caps.sampling is not None and caps.sampling.tools is not None


def is_modern(ctx: Context) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def actor_of(ctx: Context, how: str = "mcp-elicitation") -> str:
    """Who decided an interrupt, as recorded with the decision: the channel and the client's name."""
    params = ctx.session.client_params
    name = params.client_info.name if params is not None else None
    return f"{how}:{name}" if name else how


class _Progress:
    """Progress notifications whose value strictly increases (seconds waited), as the spec asks."""

    def __init__(self, ctx: Context, total: float, clock: WaitClock, text: TextRelay | None = None) -> None:
        self.ctx = ctx
        self.total = total
        self.clock = clock
        self.start = clock.now()
        self.last = -1.0
        self.status: str | None = None
        self.text = text

    async def send(self, run: Run) -> None:
        if self.status is not None and run.status != self.status:
            text = f"run {run.id}: {self.status} -> {run.status}" + (f" ({run.error})" if run.error else "")
            await log(self.ctx, level_of(run.status), text)
        self.status = run.status
        for piece in await self.text.fresh(run) if self.text is not None else []:
            await log(self.ctx, "info", {"run_id": run.id, "text": piece})
            await self.ctx.report_progress(self._tick(), self.total, piece)
        where = f" at step {run.step}" if run.step else ""
        await self.ctx.report_progress(self._tick(), self.total, f"run {run.id} is {run.status}{where}")

    def _tick(self) -> float:
        value = max(round(self.clock.now() - self.start, 3), self.last + 0.001)
        self.last = value
        return value


class RunWaiter:
    """Waits on runs for the tools of one server."""

    def __init__(
        self,
        rt: Runtime,
        *,
        heartbeat_s: float = HEARTBEAT_S,
        sampling: ClientSampling | None = None,
        clock: WaitClock | None = None,
    ) -> None:
        self.rt = rt
        self.heartbeat_s = heartbeat_s
        self.sampling = sampling
        self.clock = clock or LoopClock()

    async def settle(self, run_id: str, budget_s: float, progress: _Progress) -> Run:
        """The run once it is terminal, waiting or needs review, or when ``budget_s`` ran out.

        ``progress`` carries the tool call's whole budget across several settles (values keep rising).
        """
        run = await self.rt.runs.get(run_id)
        if run.status in SETTLED or budget_s <= 0:
            return run
        last = run
        clock = self.clock
        began = clock.now()

        async def heartbeat() -> None:
            beat = began
            while True:  # on a grid from the start (a slow send does not shift the beats after it), never bunched
                beat = max(beat + self.heartbeat_s, clock.now())
                await clock.sleep_until(beat)
                await progress.send(last)

        async def follow() -> None:
            nonlocal last
            async with anyio.create_task_group() as tg:
                tg.start_soon(heartbeat)
                async for changed in self.rt.runs.watch(run_id):
                    last = changed
                    await progress.send(changed)
                    if changed.status in SETTLED:
                        break
                tg.cancel_scope.cancel()

        await before(clock, began + budget_s, follow)
        return last if last.status in SETTLED else await self.rt.runs.get(run_id)

    async def wait(self, ctx: Context, run_id: str, budget_s: float) -> Run | InputRequiredResult:
        """Settle, and while the run waits on a human, ask through the client when it can.

        While this call waits, the run's model calls on the ``sampling`` provider go to this client.
        """
        if self.sampling is None or not client_can_sample(ctx):
            return await self._wait(ctx, run_id, budget_s, None)
        if is_modern(ctx):  # model calls are handed out in the InputRequiredResult
            return await self._wait(ctx, run_id, budget_s, self.sampling.queue)
        with self.sampling.watching(ctx.session, ctx.request_id, run_id, tools=client_samples_tools(ctx)):
            return await self._wait(ctx, run_id, budget_s, None)

    async def _wait(
        self, ctx: Context, run_id: str, budget_s: float, queue: SamplingQueue | None
    ) -> Run | InputRequiredResult:
        deadline = self.clock.now() + budget_s
        progress = _Progress(ctx, budget_s, self.clock, TextRelay(self.rt, run_id))
        asked = set(await self.apply_answers(ctx, run_id))
        while True:
            left = deadline - self.clock.now()
            if queue is None:
                run = await self.settle(run_id, left, progress)
            else:
                with queue.waiting(run_id):
                    run, samples = await self._settle_or_sample(ctx, queue, run_id, left, progress)
                if samples:
                    return self._input_required(ctx, run_id, asked, [], samples)
            fresh = [i for i in run.pending_interrupts if i.id not in asked]
            if run.status != "waiting" or not fresh or deadline <= self.clock.now() or not client_can_elicit(ctx):
                return run
            if is_modern(ctx):
                return self._input_required(ctx, run_id, asked, fresh, {})
            asked |= {i.id for i in fresh}
            if not await self._elicit(ctx, fresh, deadline):
                return await self.rt.runs.get(run_id)

    async def _settle_or_sample(
        self, ctx: Context, queue: SamplingQueue, run_id: str, budget_s: float, progress: _Progress
    ) -> tuple[Run, dict[str, ModelRequest]]:
        """Settle, unless a model call of a run needs this (2026-07-28) client's model first."""
        deadline = self.clock.now() + budget_s
        while True:
            samples = queue.take(run_id)
            left = deadline - self.clock.now()
            if samples or left <= 0:
                return await self.rt.runs.get(run_id), samples
            settled = await self._settle_unless_sampled(ctx, queue, run_id, left, progress)
            if settled is not None:
                return settled, {}

    async def _settle_unless_sampled(
        self, ctx: Context, queue: SamplingQueue, run_id: str, budget_s: float, progress: _Progress
    ) -> Run | None:
        """The settled run, or None when a model call arrived first."""
        settled: Run | None = None
        async with anyio.create_task_group() as tg:

            async def settle() -> None:
                nonlocal settled
                settled = await self.settle(run_id, budget_s, progress)
                tg.cancel_scope.cancel()

            async def sample() -> None:
                await queue.arrived(run_id)
                tg.cancel_scope.cancel()

            tg.start_soon(settle)
            tg.start_soon(sample)
        return settled

    def _input_required(
        self, ctx: Context, run_id: str, asked: set[str], fresh: list[Interrupt], samples: dict[str, ModelRequest]
    ) -> InputRequiredResult:
        """Questions for a 2026-07-28 client: interrupts as elicitations, model calls as sampling requests."""
        requests: dict[str, InputRequest] = {i.id: request_for(i) for i in fresh}
        tools = client_samples_tools(ctx)
        for key, request in samples.items():
            requests[key] = CreateMessageRequest(params=to_params(request, with_tools=tools))
        state = {"run_id": run_id, "asked": sorted(asked | {i.id for i in fresh}), "sampling": sorted(samples)}
        return InputRequiredResult(input_requests=requests, request_state=json.dumps(state))

    async def _elicit(self, ctx: Context, interrupts: list[Interrupt], deadline: float) -> int:
        """Ask each interrupt over the connection (handshake era); returns how many were decided."""
        decided = 0
        for interrupt in interrupts:
            result = await before(self.clock, deadline, partial(self._ask, ctx, interrupt))
            if result is None:
                return decided
            answer = answer_from(interrupt, result)
            if answer is not None and await self._decide(ctx, interrupt.id, answer):
                decided += 1
        return decided

    async def _ask(self, ctx: Context, interrupt: Interrupt) -> ElicitResult | None:
        """The client's answer to one interrupt's form, or None when it refused to ask."""
        try:
            result: ElicitResult = await ctx.session.elicit_form(
                message_for(interrupt), form_for(interrupt), related_request_id=ctx.request_id
            )
        except MCPError as exc:
            logger.info("client refused elicitation for %s: %s", interrupt.id, exc)
            return None
        return result

    async def apply_answers(self, ctx: Context, run_id: str) -> list[str]:
        """On a 2026-07-28 retry: record the answers the client brought; returns ids already asked."""
        state = self.resumed_state(ctx)
        if state is None or state.get("run_id") != run_id:
            return []
        responses = ctx.input_responses or {}
        if self.sampling is not None:
            queue = self.sampling.queue
            handed = [str(k) for k in state.get("sampling", [])]
            for key in handed:
                response = responses.get(key)
                if isinstance(response, CreateMessageResult | CreateMessageResultWithTools):
                    queue.answer(key, response)
            queue.release([k for k in handed if k not in responses])
        pending = {i.id: i for i in (await self.rt.runs.get(run_id)).pending_interrupts}
        for key, response in responses.items():
            if key in pending and isinstance(response, ElicitResult):
                answer = answer_from(pending[key], response)
                if answer is not None:
                    await self._decide(ctx, key, answer)
        return [str(i) for i in state.get("asked", [])]

    @classmethod
    def resumed_run_id(cls, ctx: Context) -> str | None:
        """The run a 2026-07-28 retry carrying answers is about (it exists already); None on a first call."""
        state = cls.resumed_state(ctx)
        return str(state["run_id"]) if state is not None else None

    @staticmethod
    def resumed_state(ctx: Context) -> dict[str, Any] | None:
        """The state this server put in an ``InputRequiredResult`` (sealed by the SDK), if this is a retry."""
        raw = ctx.request_state
        if not raw:
            return None
        try:
            state = json.loads(raw)
        except ValueError:
            return None
        return state if isinstance(state, dict) and isinstance(state.get("run_id"), str) else None

    async def _decide(self, ctx: Context, interrupt_id: str, answer: Answer) -> bool:
        try:
            await self.rt.runs.resolve_interrupt(
                interrupt_id, answer.action, answer.value, answer.reason, actor=actor_of(ctx)
            )
        except ConflictError:  # someone else decided it first: their decision stands
            return False
        return True
