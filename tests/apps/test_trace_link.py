"""A traced run's page shows its trace id, linked into the team's trace UI when the server has
``RATH_TRACE_URL``: headless Chromium against a real ``rath-mcp serve --transport http`` that exports
its spans to a local OTLP receiver."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from playwright.async_api import Page, expect

from tests.apps.conftest import call
from tests.otel_receiver import Receiver, receiving, trace_env
from tests.transports._servers import http_server

pytestmark = pytest.mark.anyio
SETTLE_MS = 30_000  # how long the page may take to show a change (a bound, never a measurement)
TEMPLATE = "http://jaeger.example:16686/trace/{trace_id}"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """A receiver, and the environment that sends the server's traces to it and names the trace UI."""
    with receiving() as found:
        for key, value in trace_env(found.url).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("RATH_TRACE_URL", TEMPLATE)
        yield found


async def test_a_traced_runs_page_links_its_trace(page: Page, home: Path, receiver: Receiver) -> None:
    async with http_server("http", home) as server, Client(f"{server.base}/mcp") as mcp:
        run = await call(mcp, "run_start", workflow="echo", message="hello", wait_s=20)
        assert run["status"] == "succeeded" and len(run["trace_id"]) == 32, run
        link = TEMPLATE.replace("{trace_id}", run["trace_id"])
        assert run["trace_url"] == link
        await page.goto(f"{server.base}/ui/runs/{run['run_id']}")
        shown = page.locator('#run-header dd[data-field="trace"] a')
        await expect(shown).to_have_attribute("href", link, timeout=SETTLE_MS)
        await expect(shown.locator("#run-trace")).to_have_text(run["trace_id"])
