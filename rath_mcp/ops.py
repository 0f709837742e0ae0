"""Operations over HTTP: liveness, readiness (the store answers) and Prometheus metrics.

Metrics are exposed with the official ``prometheus-client``, through a registry of this server's
own (never the process-global one, so two servers in one process, as tests make, count apart).
Counters and latencies of tool calls and refusals are observed as they happen; runs by status, queue depth and
step durations are read from the store at scrape time (``OpsStore``), so they cover every worker
process on the store, not just this one. Step durations are fed incrementally: each scrape reads
the steps completed since the last one (an indexed range read), from this server's start on.
"""

from __future__ import annotations

import bisect
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import anyio
from starlette.responses import JSONResponse, Response

from runtime.backend import OpsStore
from runtime.ids import now

logger = logging.getLogger(__name__)

RUN_STATUSES = ("queued", "running", "waiting", "succeeded", "failed", "cancelled", "timed_out", "needs_review")
READY_TIMEOUT_S = 5.0
_STEP_BATCH = 5000
#: Histogram bounds in seconds (tool calls last milliseconds to the 50 s wait cap; steps up to minutes).
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class _Histogram:
    """Counts per bucket and a sum: what a Prometheus histogram exposes, kept as plain numbers."""

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        bounds = [*(repr(b) for b in BUCKETS), "+Inf"]
        running, out = 0, []
        for bound, count in zip(bounds, self.counts, strict=True):
            running += count
            out.append((bound, float(running)))
        return out


class ServerMetrics:
    """The metrics of one server instance.

    Counted as plain numbers as calls happen (no import of the Prometheus library on the way: a
    stdio server that is never scraped does not pay for it at start); ``exposition`` renders them
    through ``prometheus-client``, with a registry of this instance's own.
    """

    def __init__(self, ops: OpsStore, *, clock: Callable[[], float] = now) -> None:
        self.ops = ops
        self.tool_calls: Counter[tuple[str, str]] = Counter()
        self.tool_latency: dict[str, _Histogram] = {}
        self.refusals: Counter[str] = Counter()
        self.steps: dict[str, _Histogram] = {}
        self.runs: dict[str, int] = {}
        self._steps_after = clock()
        self._scrape_lock = anyio.Lock()
        self._registry: Any = None

    def tool_called(self, tool: str, outcome: str, seconds: float) -> None:
        self.tool_calls[(tool, outcome)] += 1
        self.tool_latency.setdefault(tool, _Histogram()).observe(seconds)

    def refused(self, reason: str) -> None:
        self.refusals[reason] += 1

    async def refresh(self) -> None:
        """Read what only the store knows: runs by status, the queue, steps completed since the last scrape."""
        async with self._scrape_lock:  # two scrapes at once must not count the same steps twice
            counts = await self.ops.run_counts()
            self.runs = {status: counts.get(status, 0) for status in sorted({*RUN_STATUSES, *counts})}
            while True:
                done = await self.ops.step_durations(self._steps_after, _STEP_BATCH)
                for completed_at, workflow, seconds in done:
                    self.steps.setdefault(workflow, _Histogram()).observe(seconds)
                    self._steps_after = max(self._steps_after, completed_at)
                if len(done) < _STEP_BATCH:
                    break

    def families(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        runs = GaugeMetricFamily("rath_runs", "Runs in the store by status", labels=["status"])
        for status, count in self.runs.items():
            runs.add_metric([status], count)
        yield runs
        yield GaugeMetricFamily("rath_queue_depth", "Runs queued for a worker", value=self.runs.get("queued", 0))
        steps = HistogramMetricFamily("rath_step_duration_seconds", "Durations of completed steps", labels=["workflow"])
        for workflow, histogram in sorted(self.steps.items()):
            steps.add_metric([workflow], histogram.cumulative(), histogram.total)
        yield steps
        calls = CounterMetricFamily("rath_tool_calls", "Tool calls by tool and outcome", labels=["tool", "outcome"])
        for (tool, outcome), count in sorted(self.tool_calls.items()):
            calls.add_metric([tool, outcome], count)
        yield calls
        latency = HistogramMetricFamily("rath_tool_call_duration_seconds", "Tool call latencies", labels=["tool"])
        for tool, histogram in sorted(self.tool_latency.items()):
            latency.add_metric([tool], histogram.cumulative(), histogram.total)
        yield latency
        refusals = CounterMetricFamily("rath_refusals", "Refused requests by reason", labels=["reason"])
        for reason, count in sorted(self.refusals.items()):
            refusals.add_metric([reason], count)
        yield refusals

    def collect(self) -> Iterator[Any]:  # the Collector interface of prometheus-client
        return self.families()

    async def exposition(self) -> Response:
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        await self.refresh()
        if self._registry is None:  # this server's own registry, never the process-global one
            self._registry = CollectorRegistry(auto_describe=False)
            self._registry.register(self)
        return Response(generate_latest(self._registry), media_type=CONTENT_TYPE_LATEST)


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
