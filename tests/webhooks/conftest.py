"""The webhook tests' store (SQLite and PostgreSQL, with the signing secret set) and their helpers."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime import Runtime
from runtime.durable.store_shared import Scope
from runtime.store import StoreURL
from tests.store.contracts.conftest import migrated_store_url
from tests.webhooks.receiver import key_of

SECRET = "whsec_" + base64.b64encode(bytes(range(7, 39))).decode()
KEY = key_of(SECRET)


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StoreURL:
    monkeypatch.setenv("RATH_WEBHOOK_SECRET", SECRET)
    return migrated_store_url(request.param, tmp_path, request)


@asynccontextmanager
async def opened(
    home: Path, url: StoreURL, *, own_sender: bool = True, hosts: str = "127.0.0.1"
) -> AsyncIterator[Runtime]:
    async with Runtime.open(home, store=url, workers=2, allow_webhook_hosts=hosts) as rt:
        if not own_sender:
            assert rt.webhooks.sender is not None
            rt.webhooks.sender.clock = lambda: 0.0  # nothing is ever due on it: the test's sender sends
        yield rt


async def last(rt: Runtime, run_id: str, until: str | None = None) -> dict[str, Any]:
    """The run's latest notification (once its status is ``until``: the runtime's sender records it just
    after the receiver answered)."""
    with anyio.fail_after(30):
        while True:
            found = await rt.webhooks.last(Scope(rt.tenant, rt.project), run_id)
            if found is not None and (until is None or found["status"] == until):
                return found
            await anyio.sleep(0.02)
