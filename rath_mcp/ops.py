"""Operations over HTTP: liveness, readiness (the store answers) and Prometheus metrics.

Metrics use the official ``prometheus-client`` with a registry of this server's own (never the
process-global one, so two servers in one process, as tests make, count apart). Counters and
latencies of tool calls and refusals are observed as they happen; runs by status, queue depth and
step durations are read from the store at scrape time (``OpsStore``), so they cover every worker
process on the store, not just this one. Step durations are fed incrementally: each scrape reads
the steps completed since the last one (an indexed range read), from this server's start on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.responses import JSONResponse, Response

from runtime.access.store import OpsStore
from runtime.ids import now

logger = logging.getLogger(__name__)

RUN_STATUSES = ("queued", "running", "waiting", "succeeded", "failed", "cancelled", "timed_out", "needs_review")
READY_TIMEOUT_S = 5.0
_STEP_BATCH = 5000


class ServerMetrics:
    """The metrics of one server instance, in a registry of its own."""

    def __init__(self, ops: OpsStore, *, clock: Callable[[], float] = now) -> None:
        self.ops = ops
        self.registry = CollectorRegistry(auto_describe=True)
        self.runs = Gauge("rath_runs", "Runs in the store by status", ["status"], registry=self.registry)
        self.queue_depth = Gauge("rath_queue_depth", "Runs queued and waiting for a worker", registry=self.registry)
        self.steps = Histogram(
            "rath_step_duration_seconds", "Durations of completed steps", ["workflow"], registry=self.registry
        )
        self.tool_calls = Counter(
            "rath_tool_calls", "Tool calls by tool and outcome", ["tool", "outcome"], registry=self.registry
        )
        self.tool_latency = Histogram(
            "rath_tool_call_duration_seconds", "Tool call latencies", ["tool"], registry=self.registry
        )
        self.refusals = Counter("rath_refusals", "Refused requests by reason", ["reason"], registry=self.registry)
        self._steps_after = clock()
        self._scrape_lock = anyio.Lock()

    def tool_called(self, tool: str, outcome: str, seconds: float) -> None:
        self.tool_calls.labels(tool=tool, outcome=outcome).inc()
        self.tool_latency.labels(tool=tool).observe(seconds)

    def refused(self, reason: str) -> None:
        self.refusals.labels(reason=reason).inc()

    async def refresh(self) -> None:
        """Read what only the store knows: runs by status, the queue, steps completed since the last scrape."""
        async with self._scrape_lock:  # two scrapes at once must not feed the same steps twice
            counts = await self.ops.run_counts()
            for status in sorted({*RUN_STATUSES, *counts}):
                self.runs.labels(status=status).set(counts.get(status, 0))
            self.queue_depth.set(counts.get("queued", 0))
            while True:
                done = await self.ops.step_durations(self._steps_after, _STEP_BATCH)
                for completed_at, workflow, seconds in done:
                    self.steps.labels(workflow=workflow).observe(seconds)
                    self._steps_after = max(self._steps_after, completed_at)
                if len(done) < _STEP_BATCH:
                    break

    async def exposition(self) -> Response:
        await self.refresh()
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


def live() -> Response:
    """The process serves HTTP: nothing else is asked."""
    return JSONResponse({"status": "live"})


async def ready(ops: OpsStore) -> Response:
    """Ready when the store answers a query within a few seconds; 503 saying why otherwise."""
    reason: str | None = None
    with anyio.move_on_after(READY_TIMEOUT_S) as scope:
        try:
            await ops.ping()
        except Exception as exc:  # whatever the store raised is the reason, in one line
            reason = f"the store does not answer: {' '.join(str(exc).split()) or type(exc).__name__}"
    if scope.cancelled_caught:
        reason = f"the store did not answer within {READY_TIMEOUT_S:g} s"
    if reason is not None:
        logger.warning("not ready: %s", reason)
        return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)
    return JSONResponse({"status": "ready"})
