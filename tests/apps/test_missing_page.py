"""A link to a run or session the server does not know (mistyped, stale, another project's) opens a
readable "no such …" page with the way back to the runs, in headless Chromium against a real
``rath-mcp serve --transport http`` — not a blank page with a small red notice that keeps polling."""

from __future__ import annotations

import pytest
from mcp import Client
from playwright.async_api import Page, expect

from tests.apps.conftest import call, screenshot
from tests.transports._servers import RunningServer

pytestmark = pytest.mark.anyio
SETTLE_MS = 30_000  # how long the page may take to show a change (a bound, never a measurement)
UNKNOWN_RUN = "run_0000000000000000000000000"


async def test_an_unknown_run_is_a_no_such_run_page_with_a_way_back_to_the_runs(
    page: Page, server: RunningServer, mcp: Client
) -> None:
    done = await call(mcp, "run_start", workflow="echo", message="hello", wait_s=20)
    await page.goto(f"{server.base}/ui/runs/{UNKNOWN_RUN}")

    missing = page.locator("#missing")
    await expect(missing.locator("h1")).to_have_text("No such run", timeout=SETTLE_MS)
    await expect(missing.locator("code")).to_have_text(UNKNOWN_RUN)
    await expect(missing).to_contain_text(f"no run {UNKNOWN_RUN}")  # what the server said
    await expect(page.locator("#notice")).to_be_empty()
    await expect(page.locator("#run-header")).to_have_count(0)
    await screenshot(page, "run-missing")

    await missing.locator("a#to-runs").click()
    await expect(page).to_have_url(f"{server.base}/ui")
    await expect(page.locator(f'#runs tr[data-run="{done["run_id"]}"]')).to_be_visible(timeout=SETTLE_MS)


async def test_an_unknown_session_is_a_no_such_session_page(page: Page, server: RunningServer) -> None:
    await page.goto(f"{server.base}/ui/sessions/ses_0000000000000000000000000")
    await expect(page.locator("#missing h1")).to_have_text("No such session", timeout=SETTLE_MS)
    await expect(page.locator("#missing a#to-runs")).to_have_attribute("href", "/ui")
