"""The ``RunStore`` contract for a run's trace context (``runs.trace_context``), on every backend.

A run is created with the W3C trace context of the span that started it (JSON); whoever claims the
run is given it (its drives' spans are children there: ``runtime.durable.traced``) and a run read
back names its trace id. A run created with none has none.
"""

from __future__ import annotations

import json

import pytest

from runtime.backend import StoreBackend
from tests.store.contracts.test_run_store import new_run, runs

pytestmark = pytest.mark.anyio

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CONTEXT = json.dumps({"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01", "tracestate": "rath=test"})


async def test_a_runs_trace_context_is_kept_given_to_its_claim_and_names_its_trace(backend: StoreBackend) -> None:
    store = runs(backend)
    traced = await store.create(new_run(trace_context=CONTEXT), [("run.created", {})])
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    assert (claim.id, claim.trace_context, claim.lost_leases) == (traced, CONTEXT, 0)
    run = await store.get(traced)
    assert run.trace_context == CONTEXT and run.trace_id == TRACE and run.summary()["trace_id"] == TRACE


async def test_a_run_created_without_a_trace_context_has_none(backend: StoreBackend) -> None:
    store = runs(backend)
    plain = await store.create(new_run(), [("run.created", {})])
    (claim,) = await store.claim("w", 30.0, 1, ["wf"])
    assert claim.trace_context is None
    assert (await store.get(plain)).summary()["trace_id"] is None
