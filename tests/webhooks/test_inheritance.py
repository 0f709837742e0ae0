"""Which URL a run that comes from another run notifies (docs/webhooks.md), on SQLite and PostgreSQL.

A fork keeps its origin's ``notify_url`` (the origin's work, carried on). A run a step starts is a run
of its own: it notifies what it was started with, or its workflow's URL, never its parent's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime import Runtime, StepContext, Workflow, step
from runtime.durable.store_shared import Scope
from runtime.errors import InvalidInputError
from runtime.store import StoreURL
from tests.deploy_flow import Deploy
from tests.webhooks.conftest import opened
from tests.webhooks.receiver import receiving

pytestmark = pytest.mark.anyio


async def notified(rt: Runtime, run_id: str) -> dict[str, Any] | None:
    """The run's latest notification (written with the change that ends the run: no waiting needed)."""
    return await rt.webhooks.last(Scope(rt.tenant, rt.project), run_id)


async def test_a_fork_notifies_its_origins_url(tmp_path: Path, store_url: StoreURL) -> None:
    with receiving() as receiver:
        async with opened(tmp_path / "home", store_url) as rt:
            rt.workflows.register(Deploy)
            origin = await rt.runs.start("deploy", notify_url=receiver.url)
            assert (await rt.runs.wait(origin.id, 30)).status == "failed"
            fork = await rt.runs.fork(origin.id, state_patch={"target": "staging"})
            assert (await rt.runs.wait(fork.id, 30)).status == "succeeded"
            assert (await rt.runs.get(fork.id)).notify_url == receiver.url
            sent = [json.loads(r.body) for r in await receiver.wait_for(2)]
            by_run = {body["data"]["run_id"]: body for body in sent}
            assert by_run[origin.id]["type"] == "run.failed"
            assert by_run[fork.id]["type"] == "run.succeeded"
            assert by_run[fork.id]["data"]["forked_from"]["run_id"] == origin.id


async def test_a_fork_of_a_run_without_a_url_notifies_its_workflows_own(tmp_path: Path, store_url: StoreURL) -> None:
    with receiving() as receiver:

        class Named(Deploy):
            """Deploy, naming where its runs are told of."""

            name = "deploy"
            notify_url = receiver.url

        async with opened(tmp_path / "home", store_url) as rt:
            rt.workflows.register(Deploy)
            origin = await rt.runs.start("deploy")
            assert (await rt.runs.wait(origin.id, 30)).status == "failed"
            assert await notified(rt, origin.id) is None
            rt.workflows.register(Named, replace=True)
            fork = await rt.runs.fork(origin.id, state_patch={"target": "staging"})
            assert (await rt.runs.wait(fork.id, 30)).status == "succeeded"
            (got,) = await receiver.wait_for(1)
            assert json.loads(got.body)["data"]["run_id"] == fork.id


async def test_a_fork_whose_url_this_server_refuses_is_an_error_and_nothing_is_written(
    tmp_path: Path, store_url: StoreURL
) -> None:
    with receiving() as receiver:
        async with opened(tmp_path / "home", store_url) as rt:
            rt.workflows.register(Deploy)
            origin = await rt.runs.start("deploy", notify_url=receiver.url)
            assert (await rt.runs.wait(origin.id, 30)).status == "failed"
        async with opened(tmp_path / "home", store_url, hosts="") as rt:  # 127.0.0.1 no longer named
            rt.workflows.register(Deploy)
            with pytest.raises(InvalidInputError, match="notify_url"):
                await rt.runs.fork(origin.id, state_patch={"target": "staging"})
            runs, _ = await rt.runs.list(limit=10)
            assert [r.id for r in runs] == [origin.id]


async def test_a_run_a_step_starts_does_not_notify_its_parents_url(tmp_path: Path, store_url: StoreURL) -> None:
    with receiving() as receiver:
        async with opened(tmp_path / "home", store_url) as rt:

            class Parent(Workflow):
                """Starts a run of echo from its step (no notify_url given there)."""

                @step(entry=True)
                async def spawn(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
                    child = await rt.runs.start("echo", input={"message": "hi"})
                    return {"child": child.id}

            rt.workflows.register(Parent)
            parent = await rt.runs.start("parent", notify_url=receiver.url)
            done = await rt.runs.wait(parent.id, 30)
            assert done.status == "succeeded"
            child = await rt.runs.wait(done.state["child"], 30)
            assert child.status == "succeeded" and child.notify_url is None
            assert await notified(rt, child.id) is None  # its end wrote no notification
            assert (await notified(rt, parent.id)) is not None
            (got,) = await receiver.wait_for(1)
            assert json.loads(got.body)["data"]["run_id"] == parent.id
