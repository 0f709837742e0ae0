"""The viewer as an MCP resource and tool metadata, through the real SDK client in memory, and the
/ui routes on both HTTP transports: what a host with Apps sees, and that a host without Apps gets
exactly the results it always got."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from rath_mcp.apps import LINKED_TOOLS, VIEWER_URI, viewer_html
from rath_mcp.server import build_server
from runtime import Runtime
from tests.transports._servers import http_server

pytestmark = pytest.mark.anyio
APPS_HOST = advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})


async def test_the_run_and_lineage_tools_point_at_the_viewer_and_no_other_tool_does(rt: Runtime) -> None:
    async with Client(build_server(rt)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    linked = {name for name, tool in tools.items() if (tool.meta or {}).get("ui")}
    assert linked == set(LINKED_TOOLS)
    for name in LINKED_TOOLS:
        assert tools[name].meta == {"ui": {"resourceUri": VIEWER_URI}}


async def test_the_viewer_is_a_ui_resource_of_the_mcp_app_type_and_the_server_advertises_apps(rt: Runtime) -> None:
    async with Client(build_server(rt), extensions=[APPS_HOST]) as client:
        assert EXTENSION_ID in (client.server_capabilities.extensions or {})
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert listed[VIEWER_URI].mime_type == APP_MIME_TYPE
        content = (await client.read_resource(VIEWER_URI)).contents[0]
    assert content.mime_type == APP_MIME_TYPE
    text = getattr(content, "text", "")
    assert text == viewer_html() and text.lower().startswith("<!doctype html>")
    assert content.meta == {"ui": {"csp": {"connectDomains": [], "resourceDomains": []}, "prefersBorder": True}}


def test_the_shipped_viewer_is_one_self_contained_file() -> None:
    html = viewer_html()
    assert html == (Path(__file__).resolve().parents[2] / "rath_mcp" / "apps" / "viewer.html").read_text("utf-8")
    assert not re.search(r"<script[^>]*\ssrc=|<link\b|@import|<iframe|<img[^>]*\ssrc=\"?https?:", html, re.I)
    assert not re.search(r"url\(\s*['\"]?https?:", html, re.I)
    assert html.count("<script>") == 1 and html.count("</script>") == 1  # the bundle closes no tag early
    assert len(html) < 400_000


async def results(client: Client, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    out = []
    for name, arguments in calls:
        result = await client.call_tool(name, arguments)
        out.append((result.is_error, result.structured_content, [b.model_dump() for b in result.content], result.meta))
    return out


async def test_a_host_without_apps_gets_exactly_the_results_a_host_with_apps_gets(rt: Runtime) -> None:
    server = build_server(rt)
    async with Client(server) as plain:
        started = await plain.call_tool("run_start", {"workflow": "echo", "message": "hi", "wait_s": 20})
        run = started.structured_content
        assert run is not None and run["status"] == "succeeded"
        calls = [
            ("run_get", {"run_id": run["run_id"]}),
            ("run_wait", {"run_id": run["run_id"], "timeout_s": 1}),
            ("session_lineage", {"session_id": run["session_id"]}),
            ("run_get", {"run_id": "run_missing"}),
        ]
        without = await results(plain, calls)
    async with Client(server, extensions=[APPS_HOST]) as apps_host:
        with_apps = await results(apps_host, calls)
    assert without == with_apps
    assert all("ui" not in (meta or {}) for *_, meta in without)  # no result carries UI data
    assert without[0][1]["run_id"] == run["run_id"] and without[3][0] is True


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_both_http_transports_serve_the_viewer_at_ui_with_a_strict_csp(home: Path, transport: str) -> None:
    async with http_server(transport, home) as server, httpx.AsyncClient(base_url=server.base) as web:  # type: ignore[arg-type]
        pages = [await web.get(path) for path in ("/ui", "/ui/", "/ui/runs/run_x", "/ui/sessions/ses_x")]
        missing = await web.get("/ui/nothing/here")
    for page in pages:
        assert page.status_code == 200 and page.text == viewer_html()
        assert page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert missing.status_code == 404
