"""Clients that ask for log messages hear a run's status changes while they wait on it."""

from __future__ import annotations

import warnings

import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import LoggingMessageNotificationParams

from tests.mcp.conftest import call

pytestmark = pytest.mark.anyio


class LogBook:
    def __init__(self) -> None:
        self.entries: list[LoggingMessageNotificationParams] = []

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        self.entries.append(params)


async def _start_and_approve(client: Client) -> str:
    run = await call(client, "run_start", workflow="approval", input={"draft": "d"}, wait_s=10)
    iid = run["pending_interrupts"][0]["interrupt_id"]
    await call(client, "interrupt_resolve", interrupt_id=iid, action="approve")
    done = await call(client, "run_wait", run_id=run["run_id"], timeout_s=10)
    assert done["status"] == "succeeded"
    return str(run["run_id"])


async def test_a_handshake_era_client_gets_status_changes_after_logging_set_level(server: MCPServer) -> None:
    book = LogBook()
    async with Client(server, mode="legacy", logging_callback=book) as client:
        await _start_and_approve(client)
        assert book.entries == []  # nothing before the client asks
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)  # logging is a handshake-era feature
            await client.set_logging_level("info")
        run_id = await _start_and_approve(client)
    texts = [str(e.data) for e in book.entries]
    assert any(t.startswith(f"run {run_id}:") and t.endswith("-> succeeded") for t in texts), texts
    assert all(e.logger == "rath.runs" and e.level == "info" for e in book.entries)


async def test_a_2026_client_opts_in_per_request_with_log_level(server: MCPServer) -> None:
    book = LogBook()
    async with Client(server, mode="2026-07-28", logging_callback=book, log_level="info") as client:
        run_id = await _start_and_approve(client)
    assert any(str(e.data).startswith(f"run {run_id}:") for e in book.entries)


async def test_a_level_above_info_filters_out_ordinary_status_changes(server: MCPServer) -> None:
    book = LogBook()
    async with Client(server, mode="legacy", logging_callback=book) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("error")
        await _start_and_approve(client)
    assert book.entries == []
