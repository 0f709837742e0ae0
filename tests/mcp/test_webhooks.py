"""``run_start``'s ``notify_url`` and ``run_get``'s ``notify`` through a real MCP client (CONTRACT §15).

The runtime sends to a real receiver on 127.0.0.1 (named as ``--allow-webhook-hosts`` would), which
checks the signature with its own implementation of the Standard Webhooks spec.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from rath_mcp.cli import build_parser
from runtime import Runtime
from tests.mcp.conftest import call, call_error
from tests.webhooks.conftest import KEY, SECRET
from tests.webhooks.receiver import receiving, verify

pytestmark = pytest.mark.anyio


@pytest.fixture
async def rt(home: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("RATH_WEBHOOK_SECRET", SECRET)
    async with Runtime.open(home, allow_webhook_hosts="127.0.0.1") as runtime:
        yield runtime


async def delivered(client: Client, run_id: str) -> dict[str, Any]:
    """``run_get`` once its notification is recorded delivered (just after the receiver answered)."""
    with anyio.fail_after(30):
        while True:
            run = await call(client, "run_get", run_id=run_id)
            if run["notify"] and run["notify"]["status"] == "delivered":
                return run
            await anyio.sleep(0.02)


async def test_run_start_notifies_and_run_get_shows_the_last_try(client: Client) -> None:
    with receiving() as receiver:
        run = await call(client, "run_start", workflow="echo", message="hi", notify_url=receiver.url, wait_s=10)
        assert run["status"] == "succeeded"
        (got,) = await receiver.wait_for(1)
        assert verify(KEY, got.headers, got.body, time.time())
        shown = await delivered(client, run["run_id"])
        notify = shown["notify"]
        assert notify["webhook_id"] == got.headers["webhook-id"] and notify["event"] == "run.succeeded"
        assert (notify["attempts"], notify["code"], notify["error"], notify["next_at"]) == (1, 200, None, None)
    quiet = await call(client, "run_start", workflow="echo", message="no hook", wait_s=10)
    assert (await call(client, "run_get", run_id=quiet["run_id"]))["notify"] is None


async def test_a_refused_notify_url_is_a_tool_error_and_starts_nothing(client: Client) -> None:
    text = await call_error(client, "run_start", workflow="echo", message="x", notify_url="http://10.0.0.1/hook")
    assert "plain http: use https, or name the host '10.0.0.1' in --allow-webhook-hosts" in text
    text = await call_error(client, "run_start", workflow="echo", message="x", notify_url="https://10.0.0.1/hook")
    assert "resolves to 10.0.0.1, a private, loopback or link-local address" in text
    assert (await call(client, "run_list"))["runs"] == []


def test_serve_and_worker_take_allow_webhook_hosts() -> None:
    for command in ("serve", "worker"):
        args = build_parser().parse_args([command, "--allow-webhook-hosts", "hooks.internal,127.0.0.1"])
        assert args.allow_webhook_hosts == "hooks.internal,127.0.0.1"
        assert build_parser().parse_args([command]).allow_webhook_hosts is None
