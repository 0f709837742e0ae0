"""Run and workflow resources, run subscriptions (both eras), prompts and completions."""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated
from mcp.server import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import (
    PromptReference,
    ResourceTemplateReference,
    ResourceUpdatedNotification,
    TextContent,
    TextResourceContents,
)

from rath_mcp.subscriptions import RunSubscriptions
from runtime import Runtime
from runtime.errors import StoreError
from tests.mcp.conftest import call

pytestmark = pytest.mark.anyio


async def _json(client: Client, uri: str) -> Any:
    contents = (await client.read_resource(uri)).contents
    assert isinstance(contents[0], TextResourceContents) and contents[0].mime_type == "application/json"
    return json.loads(contents[0].text)


async def test_run_resources_show_the_summary_and_the_events(client: Client) -> None:
    run = await call(client, "run_start", workflow="echo", message="res", wait_s=10)
    body = await _json(client, f"rath://runs/{run['run_id']}")
    assert body["run_id"] == run["run_id"] and body["status"] == "succeeded" and body["state"]["reply"] == "res"
    events = await _json(client, f"rath://runs/{run['run_id']}/events")
    assert events[0]["type"] == "run.created" and [e["seq"] for e in events] == list(range(1, len(events) + 1))


async def test_workflow_resources_list_and_describe_workflows(client: Client) -> None:
    listed = {r.uri for r in (await client.list_resources()).resources}
    assert "rath://workflows" in listed
    names = [w["name"] for w in await _json(client, "rath://workflows")]
    assert {"echo", "approval"} <= set(names)
    assert (await _json(client, "rath://workflows/approval"))["name"] == "approval"
    with pytest.raises(MCPError, match="no workflow named 'nope'"):
        await client.read_resource("rath://workflows/nope")


async def test_every_contract_resource_template_is_listed(client: Client) -> None:
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert templates >= {
        "rath://sessions/{session_id}",
        "rath://sessions/{session_id}/transcript",
        "rath://sessions/{session_id}/lineage",
        "rath://runs/{run_id}",
        "rath://runs/{run_id}/events",
        "rath://workflows/{name}",
        "rath://memory/{memory_id}",
    }


async def test_a_subscribed_run_resource_is_updated_on_status_changes_legacy(server: MCPServer) -> None:
    updates: list[str] = []
    updated = anyio.Event()

    async def on_message(message: Any) -> None:
        nonlocal updated
        if isinstance(message, ResourceUpdatedNotification):
            updates.append(message.params.uri)
            updated.set()

    async with Client(server, mode="legacy", message_handler=on_message) as client:
        assert client.server_capabilities is not None and client.server_capabilities.resources is not None
        assert client.server_capabilities.resources.subscribe is True
        run = await call(client, "run_start", workflow="approval", input={"draft": "d"}, wait_s=10)
        uri = f"rath://runs/{run['run_id']}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)  # resources/subscribe is the handshake-era API
            await client.subscribe_resource(uri)
            with pytest.raises(MCPError, match="run_missing"):
                await client.subscribe_resource("rath://runs/run_missing")
        await call(
            client, "interrupt_resolve", interrupt_id=run["pending_interrupts"][0]["interrupt_id"], action="approve"
        )
        with anyio.fail_after(10):
            while (await _json(client, uri))["status"] != "succeeded" or uri not in updates:
                await updated.wait()
                updated = anyio.Event()
        assert updates.count(uri) >= 1


async def test_a_listened_run_resource_is_updated_on_status_changes_2026(server: MCPServer) -> None:
    async with Client(server, mode="2026-07-28") as client:
        run = await call(client, "run_start", workflow="approval", input={"draft": "d"}, wait_s=10)
        uri = f"rath://runs/{run['run_id']}"
        async with client.listen(resource_subscriptions=[uri]) as subscription:
            await call(
                client, "interrupt_resolve", interrupt_id=run["pending_interrupts"][0]["interrupt_id"], action="approve"
            )
            seen = 0
            with anyio.fail_after(10):
                async for event in subscription:
                    assert isinstance(event, ResourceUpdated) and event.uri == uri
                    seen += 1
                    if (await _json(client, uri))["status"] == "succeeded":
                        break
            assert seen >= 1


async def test_prompts_delegate_task_and_review_run_are_offered(client: Client) -> None:
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert {"delegate_task", "review_run"} <= set(prompts)
    assert [a.name for a in prompts["delegate_task"].arguments or []] == ["task", "workflow"]
    got = await client.get_prompt("delegate_task", {"task": "Write a haiku", "workflow": "echo"})
    text = got.messages[0].content
    assert isinstance(text, TextContent) and "delegate" in text.text and "Write a haiku" in text.text


async def test_review_run_shows_the_run_and_what_it_waits_on(client: Client) -> None:
    run = await call(client, "run_start", workflow="approval", input={"draft": "Review me"}, wait_s=10)
    got = await client.get_prompt("review_run", {"run_id": run["run_id"]})
    text = got.messages[0].content
    assert isinstance(text, TextContent)
    assert run["run_id"] in text.text and "interrupt.created" in text.text and "interrupt_resolve" in text.text
    with pytest.raises(MCPError, match="run_missing"):
        await client.get_prompt("review_run", {"run_id": "run_missing"})


async def test_completion_offers_workflow_names_and_ids(client: Client) -> None:
    done = await call(client, "run_start", workflow="echo", message="c", wait_s=10)
    workflows = await client.complete(
        PromptReference(type="ref/prompt", name="delegate_task"), {"name": "workflow", "value": "ap"}
    )
    assert workflows.completion.values == ["approval"]
    runs = await client.complete(
        ResourceTemplateReference(type="ref/resource", uri="rath://runs/{run_id}"), {"name": "run_id", "value": "run_"}
    )
    assert runs.completion.values == [done["run_id"]]
    sessions = await client.complete(
        ResourceTemplateReference(type="ref/resource", uri="rath://sessions/{session_id}"),
        {"name": "session_id", "value": "ses_"},
    )
    assert done["session_id"] in sessions.completion.values
    names = await client.complete(
        ResourceTemplateReference(type="ref/resource", uri="rath://workflows/{name}"), {"name": "name", "value": "e"}
    )
    assert names.completion.values == ["echo"]


async def test_completion_finds_old_ids_by_prefix_and_says_when_there_are_more(client: Client, rt: Runtime) -> None:
    """Ids are searched by prefix in the store, so an id older than the newest hundreds is still found."""
    oldest = await rt.sessions.create([{"kind": "user", "content": "first"}])
    for i in range(600):
        await rt.sessions.create([{"kind": "user", "content": f"s{i}"}])
    template = ResourceTemplateReference(type="ref/resource", uri="rath://sessions/{session_id}")
    exact = await client.complete(template, {"name": "session_id", "value": oldest.id})
    assert exact.completion.values == [oldest.id] and exact.completion.total == 1 and not exact.completion.has_more
    many = await client.complete(template, {"name": "session_id", "value": "ses_"})
    assert len(many.completion.values) == 100 and many.completion.has_more and many.completion.total is None
    newest, _ = await rt.sessions.page(None, 100)
    assert many.completion.values == [s.id for s in newest]
    none = await client.complete(template, {"name": "session_id", "value": "run_"})
    assert none.completion.values == [] and not none.completion.has_more


async def test_concurrent_listens_on_one_run_share_one_watcher_that_stops_with_them(rt: Runtime) -> None:
    run = await rt.runs.start("approval", input={"draft": "d"})
    uri = f"rath://runs/{run.id}"
    subscriptions = RunSubscriptions(rt, InMemorySubscriptionBus())
    opened: list[list[tuple[str, str]]] = []

    async def listen() -> None:
        opened.append(await subscriptions.open_stream([uri]))

    async with anyio.create_task_group() as tg:  # both look the run up before either registers a watcher
        tg.start_soon(listen)
        tg.start_soon(listen)
    watch = subscriptions._watches[run.id]
    assert watch.streams == {uri: 2}
    for pairs in opened:
        subscriptions.close_stream(pairs)
    assert run.id not in subscriptions._watches and watch.scope.cancel_called


async def test_a_failing_run_watcher_ends_its_watch_and_leaves_the_runtime_running(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    run = await rt.runs.start("approval", input={"draft": "d"})
    subscriptions = RunSubscriptions(rt, InMemorySubscriptionBus())

    async def broken(run_id: str) -> AsyncIterator[Any]:
        raise StoreError("database is locked")
        yield  # pragma: no cover

    monkeypatch.setattr(rt.runs, "watch", broken)
    await subscriptions.open_stream([f"rath://runs/{run.id}"])
    with anyio.fail_after(5):
        while run.id in subscriptions._watches:  # noqa: ASYNC110 - the watcher ends in the runtime's task group
            await anyio.sleep(0.01)
    assert "database is locked" in caplog.text
    # The runtime's task group was not torn down: its worker still takes the run to its interrupt (waited
    # for, not read at once: on a loaded machine the run may not have parked yet).
    assert (await rt.runs.wait(run.id, 50)).status == "waiting"
