"""An effect awaiting review, settled from the /ui page: a worker process dies inside a
non-idempotent effect, the served run turns ``needs_review``, and **Applied** (with what the effect
returned) lets it finish without doing the effect twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from playwright.async_api import Page, expect

from rath_mcp.server import build_server
from runtime import Runtime
from tests.apps.conftest import call, screenshot
from tests.apps.test_browser import SETTLE_MS
from tests.mcp.ambiguous import FLOWS, kill_worker_mid_effect, lines
from tests.transports._servers import http_server

pytestmark = pytest.mark.anyio


async def run_needing_review(home: Path, log: Path, gate: Path) -> str:
    """A run whose worker died inside an effect, taken over (its process seen gone) until it is ``needs_review``."""
    run_id = await kill_worker_mid_effect(home, log, gate)
    async with Runtime.open(home, lease_s=3600.0) as rt:
        rt.workflows.load(FLOWS)
        async with Client(build_server(rt)) as client:
            review = await call(client, "run_wait", run_id=run_id, timeout_s=20)
    assert review["status"] == "needs_review", review
    return run_id


async def test_applied_on_the_page_settles_an_ambiguous_effect_and_the_run_succeeds(page: Page, tmp_path: Path) -> None:
    home, log = tmp_path / "home", tmp_path / "log"
    home.mkdir()
    run_id = await run_needing_review(home, log, tmp_path / "gate")
    async with http_server("http", home, "--workflows", FLOWS) as server:
        await page.goto(f"{server.base}/ui/runs/{run_id}")
        applied = page.locator('#actions .effect button[data-outcome="applied"]')
        await expect(applied).to_be_visible(timeout=SETTLE_MS)
        await expect(page.locator("#run-header")).to_have_attribute("data-status", "needs_review")
        await page.locator('#actions .effect textarea[aria-label="result"]').fill('"c-x"')
        await screenshot(page, "run-needs-review")
        await applied.click()
        await expect(page.locator("#run-header")).to_have_attribute("data-status", "succeeded", timeout=SETTLE_MS)
        async with Client(f"{server.base}/mcp") as client:
            assert (await call(client, "run_get", run_id=run_id))["status"] == "succeeded"
            assert (await call(client, "effect_list"))["effects"] == []
    assert lines(log) == ["a", "b", "c-start", "done"]  # c was not run a second time
