"""How a PostgreSQL claim serialises a workflow's concurrency count: a per-workflow advisory lock, tried.

A claimer of a limited workflow counts its running runs only while it holds that workflow's
transaction lock. Another transaction holding the lock (a claimer between its count and its commit)
makes this claim take none of that workflow's runs, at once and without waiting (waiting inside a
group-committed batch could deadlock), while it still claims other workflows' runs.
"""

from __future__ import annotations

import anyio
import asyncpg
import pytest

from runtime.durable.store import NewRun
from runtime.store import parse_store_url
from runtime.store.postgres import backend as postgres

pytestmark = pytest.mark.anyio
LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('rath-concurrency/limited', 0))"


async def test_a_claim_skips_a_limited_workflow_whose_count_another_transaction_holds(pg_url: str) -> None:
    url = parse_store_url(pg_url)
    await postgres.migrate(url)
    backend = await postgres.open(url)
    other = await asyncpg.connect(pg_url)
    try:
        store = backend.runs("local", "default")
        new = NewRun(workflow="limited", plan_hash="h", step="first", input_json="{}")
        limited = await store.create(new, [("run.created", {})])
        free = await store.create(NewRun(workflow="free", plan_hash="h", step="first", input_json="{}"), [])
        names, limits = ["free", "limited"], {"limited": 1}
        async with other.transaction():
            await other.execute(LOCK)  # another claimer, between its count and its commit
            with anyio.fail_after(10):  # would hang if the claim waited for the lock
                claims = await store.claim("w", 30.0, 5, names, limits=limits)
            assert [c.id for c in claims] == [free]
        (claim,) = await store.claim("w", 30.0, 5, names, limits=limits)  # the lock is gone with its transaction
        assert claim.id == limited
    finally:
        await other.close()
        await backend.close()
