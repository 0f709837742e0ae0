"""The ``ui://rath/viewer`` resource in a host: a minimal host page built on the reference host side
of MCP Apps (``@modelcontextprotocol/ext-apps``'s AppBridge, with ``@modelcontextprotocol/client``
connected to the real server) renders the view in a sandboxed frame under the spec's CSP, sends it
the tool's input and result, and proxies its ``tools/call`` to the server."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from playwright.async_api import FrameLocator, Page, Request, expect

from tests.apps.conftest import call, screenshot
from tests.apps.test_browser import SETTLE_MS, fork_and_merge, waiting_approval
from tests.transports._servers import RunningServer

pytestmark = pytest.mark.anyio


async def open_in_host(page: Page, base: str, script: str, tool: str, arguments: dict[str, Any]) -> FrameLocator:
    """Serve the host page at ``base/test-host`` (same origin as /mcp) and open ``tool``'s view in it."""
    inline = script.replace("</script", "<\\/script")
    html = f"<!doctype html><html><head><meta charset=utf-8><title>host</title></head><body><script>{inline}</script>"

    async def fulfill(route: Any) -> None:
        await route.fulfill(status=200, content_type="text/html", body=html)

    await page.route(f"{base}/test-host", fulfill)
    await page.goto(f"{base}/test-host")
    await page.evaluate("(a) => window.startHost(a)", {"toolName": tool, "toolArgs": arguments})
    return page.frame_locator("#view")


async def test_the_app_renders_a_run_in_a_host_and_its_approve_reaches_interrupt_resolve(
    page: Page, server: RunningServer, mcp: Client, host_script: str
) -> None:
    run = await waiting_approval(mcp, "Publish the changelog")
    requests: list[Request] = []
    page.on("request", lambda request: requests.append(request))
    view = await open_in_host(page, server.base, host_script, "run_get", {"run_id": run["run_id"]})

    await expect(view.locator("#run-header")).to_have_attribute("data-status", "waiting", timeout=SETTLE_MS)
    await expect(view.locator('#run-header dd[data-field="workflow"]')).to_have_text("approval")
    await expect(view.locator("#actions .prompt")).to_contain_text("Publish the changelog")
    resource = await page.evaluate("window.hostResource")
    assert resource["uri"] == "ui://rath/viewer" and resource["mimeType"] == "text/html;profile=mcp-app"
    await screenshot(page, "app-in-host")

    await view.locator('#actions button[data-action="approve"]').click()
    await expect(view.locator("#run-header")).to_have_attribute("data-status", "succeeded", timeout=SETTLE_MS)

    log = await page.evaluate("window.hostLog")
    interrupt_id = run["pending_interrupts"][0]["interrupt_id"]  # type: ignore[index]
    assert {"name": "interrupt_resolve", "arguments": {"interrupt_id": interrupt_id, "action": "approve"}} in log
    asked = {entry.get("name") for entry in log}
    assert asked <= {None, "run_get", "run_events", "artifact_list", "session_lineage", "interrupt_resolve"}, asked
    assert (await call(mcp, "run_get", run_id=run["run_id"]))["status"] == "succeeded"  # in the store
    # The view itself fetched nothing: every request came from the host page, to its own origin.
    assert all(r.url.startswith(server.base) for r in requests), [r.url for r in requests]
    assert not [r.url for r in requests if r.frame != page.main_frame]


async def test_the_app_draws_a_lineage_in_a_host(
    page: Page, server: RunningServer, mcp: Client, host_script: str
) -> None:
    merged, sessions = await fork_and_merge(mcp)
    view = await open_in_host(page, server.base, host_script, "session_lineage", {"session_id": merged})
    await expect(view.locator("svg.lineage g.node")).to_have_count(len(sessions), timeout=SETTLE_MS)
    await expect(view.locator("svg.lineage path.edge")).to_have_count(6)
    log = await page.evaluate("window.hostLog")
    assert [entry for entry in log if "name" in entry] == []  # the tool result was enough: no call back
