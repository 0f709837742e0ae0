"""A run's artifacts on its /ui page in headless Chromium, against a real ``rath-mcp serve --transport
http`` loading a workflow that keeps two files: both listed with name, type and size; a download
link saves the exact bytes under the artifact's name (fetched from /ui/artifacts/{id}); a link to an
artifact deleted meanwhile says what the server answered instead of saving anything."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client
from playwright.async_api import Page, expect

from tests.apps.conftest import call, screenshot
from tests.transports._servers import RunningServer, http_server

pytestmark = pytest.mark.anyio
SETTLE_MS = 30_000  # how long the page may take to show a change (a bound, never a measurement)
BINARY = bytes(range(256)) * 300
WORKFLOW = """
from runtime.flow.workflow import StepContext, Workflow, step


class KeepsFiles(Workflow):
    name = "keeps_files"

    @step(entry=True)
    async def write(self, state, ctx: StepContext):
        await ctx.save_artifact("# Report\\n\\nall good\\n", name="report.md")
        await ctx.save_artifact(bytes(range(256)) * 300, name="table.bin")
        return {}
"""


@pytest.fixture
async def server(home: Path, tmp_path: Path) -> AsyncIterator[RunningServer]:
    source = tmp_path / "keeps_files.py"
    source.write_text(WORKFLOW)
    async with http_server("http", home, "--workflows", str(source)) as running:
        yield running


async def test_a_runs_artifacts_are_listed_and_download_with_their_bytes(
    page: Page, server: RunningServer, mcp: Client, tmp_path: Path
) -> None:
    run = await call(mcp, "run_start", workflow="keeps_files", wait_s=20)
    assert run["status"] == "succeeded", run
    kept = (await call(mcp, "artifact_list", run_id=run["run_id"]))["artifacts"]
    report, table = sorted(kept, key=lambda a: a["name"])
    assert (report["name"], table["name"]) == ("report.md", "table.bin")

    await page.goto(f"{server.base}/ui/runs/{run['run_id']}")
    rows = page.locator("#artifacts tr[data-artifact]")
    await expect(rows).to_have_count(2, timeout=SETTLE_MS)
    row = page.locator(f'#artifacts tr[data-artifact="{table["artifact_id"]}"]')
    await expect(row).to_contain_text("application/octet-stream")
    await expect(row).to_contain_text("75 KiB")
    await screenshot(page, "run-artifacts")

    for artifact, expected in ((report, b"# Report\n\nall good\n"), (table, BINARY)):
        link = page.locator(f'#artifacts tr[data-artifact="{artifact["artifact_id"]}"] a.download')
        assert await link.get_attribute("href") == f"/ui/artifacts/{artifact['artifact_id']}"
        async with page.expect_download() as waiting:
            await link.click()
        download = await waiting.value
        assert download.suggested_filename == artifact["name"]
        saved = tmp_path / f"got-{artifact['name']}"
        await download.save_as(saved)
        assert saved.read_bytes() == expected

    await call(mcp, "artifact_delete", artifact_id=report["artifact_id"])
    await page.locator(f'#artifacts tr[data-artifact="{report["artifact_id"]}"] a.download').click()
    await expect(page.locator("#notice")).to_contain_text(
        f"report.md: HTTP 404: artifact {report['artifact_id']} not found", timeout=SETTLE_MS
    )
