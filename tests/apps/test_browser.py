"""The /ui page in headless Chromium against a real ``rath-mcp serve --transport http``: the runs
list with its filters, a waiting approval run answered with Approve until it succeeds, and a
session's fork-and-merge lineage drawn as an SVG graph."""

from __future__ import annotations

import pytest
from mcp import Client
from playwright.async_api import Page, Request, expect

from tests.apps.conftest import call, screenshot
from tests.transports._servers import RunningServer

pytestmark = pytest.mark.anyio
SETTLE_MS = 30_000  # how long the page may take to show a change (a bound, never a measurement)


async def waiting_approval(mcp: Client, draft: str = "Ship the release notes") -> dict[str, object]:
    message = "please review"  # the run gets an input session, so its lineage has something to draw
    run = await call(mcp, "run_start", workflow="approval", message=message, input={"draft": draft}, wait_s=20)
    assert run["status"] == "waiting", run
    return run


async def test_ui_lists_runs_filters_them_and_approve_makes_a_waiting_run_succeed(
    page: Page, server: RunningServer, mcp: Client
) -> None:
    run = await waiting_approval(mcp)
    done = await call(mcp, "run_start", workflow="echo", message="hello", wait_s=20)
    assert done["status"] == "succeeded"

    await page.goto(f"{server.base}/ui")
    waiting_row = page.locator(f'#runs tr[data-run="{run["run_id"]}"]')
    await expect(waiting_row).to_have_attribute("data-status", "waiting", timeout=SETTLE_MS)
    await expect(page.locator(f'#runs tr[data-run="{done["run_id"]}"]')).to_be_visible()

    await page.select_option("#filter-status", "waiting")
    await expect(page).to_have_url(f"{server.base}/ui?status=waiting")
    await expect(page.locator(f'#runs tr[data-run="{done["run_id"]}"]')).to_have_count(0, timeout=SETTLE_MS)
    await expect(waiting_row).to_be_visible()
    await screenshot(page, "runs")

    await waiting_row.locator("a").click()
    await expect(page).to_have_url(f"{server.base}/ui/runs/{run['run_id']}")
    approve = page.locator('#actions button[data-action="approve"]')
    await expect(approve).to_be_visible(timeout=SETTLE_MS)
    await expect(page.locator("#actions .prompt")).to_contain_text("Ship the release notes")
    await expect(page.locator('#timeline li[data-type="interrupt.created"]')).to_have_count(1)
    await screenshot(page, "run-waiting")

    await approve.click()
    await expect(page.locator("#run-header")).to_have_attribute("data-status", "succeeded", timeout=SETTLE_MS)
    await expect(page.locator("#actions")).to_have_count(0)
    await expect(page.locator('#timeline li[data-type="interrupt.decided"]')).to_have_count(1)
    stored = await call(mcp, "run_get", run_id=run["run_id"])
    assert stored["status"] == "succeeded"
    await expect(page.locator(f'svg.lineage g.node.input[data-session="{stored["session_id"]}"]')).to_have_count(1)
    if stored["output_session_id"] not in (None, stored["session_id"]):
        output = page.locator(f'svg.lineage g.node.output[data-session="{stored["output_session_id"]}"]')
        await expect(output).to_have_count(1, timeout=SETTLE_MS)
    await screenshot(page, "run-succeeded")


async def fork_and_merge(mcp: Client) -> tuple[str, list[str]]:
    root = (await call(mcp, "session_create", message="plan the trip"))["session_id"]
    forks = (await call(mcp, "session_fork", session_id=root, count=2))["session_ids"]
    left = (await call(mcp, "session_append", session_id=forks[0], content="by train"))["session_id"]
    right = (await call(mcp, "session_append", session_id=forks[1], content="by bike"))["session_id"]
    merged = (await call(mcp, "session_merge", session_ids=[left, right]))["session_id"]
    return merged, [root, *forks, left, right, merged]


async def test_a_lineage_page_draws_a_fork_and_merge_as_a_graph(page: Page, server: RunningServer, mcp: Client) -> None:
    merged, sessions = await fork_and_merge(mcp)
    await page.goto(f"{server.base}/ui/sessions/{merged}")

    nodes = page.locator("svg.lineage g.node")
    await expect(nodes).to_have_count(len(sessions), timeout=SETTLE_MS)
    drawn = {await node.get_attribute("data-session") for node in await nodes.all()}
    assert drawn == set(sessions)
    edges = page.locator("svg.lineage path.edge")
    await expect(edges).to_have_count(6)  # root→2 forks, fork→append twice, append→merge twice
    pairs = {(await e.get_attribute("data-parent"), await e.get_attribute("data-child")) for e in await edges.all()}
    assert (sessions[3], merged) in pairs and (sessions[4], merged) in pairs
    routes = [await e.get_attribute("d") for e in await edges.all()]
    assert all(d and d.startswith("M ") and " L " in d for d in routes), routes  # dagre routed every edge
    await expect(page.locator(f'svg.lineage g.node.op-merge[data-session="{merged}"]')).to_have_count(1)
    await expect(page.locator("svg.lineage g.node.op-fork")).to_have_count(2)
    await screenshot(page, "lineage")

    await page.locator(f'svg.lineage g.node[data-session="{sessions[0]}"]').click()
    await expect(page).to_have_url(f"{server.base}/ui/sessions/{sessions[0]}")
    await expect(page.locator("h1 code")).to_have_text(sessions[0], timeout=SETTLE_MS)


async def test_the_page_sends_the_fragments_token_to_mcp_and_fetches_nothing_elsewhere(
    page: Page, server: RunningServer
) -> None:
    requests: list[Request] = []
    page.on("request", lambda request: requests.append(request))
    await page.goto(f"{server.base}/ui#token=tok-123")
    await expect(page.locator("#runs")).to_be_visible(timeout=SETTLE_MS)
    assert page.url == f"{server.base}/ui"  # the token left the address bar
    to_mcp = [r for r in requests if r.url == f"{server.base}/mcp"]
    assert to_mcp and [await r.header_value("authorization") for r in to_mcp] == ["Bearer tok-123"] * len(to_mcp)
    assert all(r.url.startswith(server.base) for r in requests), [r.url for r in requests]
