"""A forked run keeps its origin's ``priority`` (docs/operations.md, Priority), through a real MCP client on
SQLite and PostgreSQL: ``run_fork`` takes no priority of its own, so the fork waits where its origin did."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client

from rath_mcp.server import build_server
from runtime import Runtime
from runtime.store import StoreURL
from tests.deploy_flow import Deploy
from tests.mcp.conftest import call
from tests.store.contracts.conftest import migrated_store_url

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> StoreURL:
    return migrated_store_url(request.param, tmp_path, request)


@pytest.fixture
async def client(tmp_path: Path, store_url: StoreURL) -> AsyncIterator[Client]:
    async with Runtime.open(tmp_path / "home", store=store_url, workers=2) as rt:
        rt.workflows.register(Deploy)
        async with Client(build_server(rt)) as c:
            yield c


@pytest.mark.parametrize("priority", [70, -30, 0])
async def test_a_fork_keeps_its_origins_priority(client: Client, priority: int) -> None:
    origin = await call(client, "run_start", workflow="deploy", input={}, priority=priority, wait_s=30)
    assert (origin["status"], origin["priority"]) == ("failed", priority)
    fork = await call(client, "run_fork", run_id=origin["run_id"], state_patch={"target": "staging"}, wait_s=30)
    assert fork["forked_from"]["run_id"] == origin["run_id"]
    assert (fork["status"], fork["priority"]) == ("succeeded", priority)
    assert (await call(client, "run_get", run_id=fork["run_id"]))["priority"] == priority  # as stored
