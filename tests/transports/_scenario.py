"""The key scenario, written once against a connected MCP client, whatever the transport or era.

It walks the contract end to end: sessions (create, fork, append, merge, get, lineage), a durable
``approval`` run that pauses on an interrupt and resumes when it is resolved (watched through a
run-resource subscription, so server-to-client notifications cross the transport), memory remember
and recall, a resource read, and a bad call that must come back as a readable ``isError`` result.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import Client
from mcp_types import TextResourceContents

from tests.transports._updates import Inbox, run_updates


async def call(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call ``tool`` and return its structured result; fail the test with the tool's text on isError."""
    result = await client.call_tool(tool, arguments or {})
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert not result.is_error, f"{tool}({arguments}) failed: {text}"
    if isinstance(result.structured_content, dict):
        return result.structured_content
    value = json.loads(text)
    assert isinstance(value, dict), f"{tool} returned {value!r}, expected an object"
    return value


async def call_error(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """Call ``tool`` expecting an ``isError`` result; return its text."""
    result = await client.call_tool(tool, arguments)
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert result.is_error, f"{tool}({arguments}) should have failed, got {result.structured_content or text}"
    return text


async def sessions_fork_and_merge(client: Client) -> str:
    """Create, fork twice, append on each branch, merge: the shared prefix appears once."""
    root = await call(client, "session_create", {"message": "plan a picnic", "system": "be brief"})
    forks = await call(client, "session_fork", {"session_id": root["session_id"], "count": 2})
    assert len(forks["session_ids"]) == 2
    branches = []
    for sid, text in zip(forks["session_ids"], ["the park", "the beach"], strict=True):
        appended = await call(client, "session_append", {"session_id": sid, "content": text, "role": "assistant"})
        branches.append(appended["session_id"])
    merged = await call(client, "session_merge", {"session_ids": branches})
    page = await call(client, "session_get", {"session_id": merged["session_id"]})
    contents = [chunk["content"] for chunk in page["chunks"]]
    assert contents == ["be brief", "plan a picnic", "the park", "the beach"], contents
    lineage = await call(client, "session_lineage", {"session_id": merged["session_id"]})
    ids = {node["id"] for node in lineage["nodes"]}
    assert {root["session_id"], *branches, merged["session_id"]} <= ids
    assert "graph TD" in lineage["mermaid"]
    return str(merged["session_id"])


async def approval_run_resumes_after_interrupt(client: Client, session_id: str, inbox: Inbox) -> str:
    """An ``approval`` run waits on an interrupt; approving it lets the run finish, and a subscriber
    to ``rath://runs/{run_id}`` hears about it."""
    run = await call(client, "run_start", {"workflow": "approval", "session_id": session_id, "wait_s": 10})
    if run["status"] != "waiting":
        run = await call(client, "run_wait", {"run_id": run["run_id"], "timeout_s": 10})
    assert run["status"] == "waiting", run
    (interrupt,) = run["pending_interrupts"]
    assert interrupt["kind"] == "approval"
    listed = await call(client, "interrupt_list", {"run_id": run["run_id"]})
    assert [i["interrupt_id"] for i in listed["interrupts"]] == [interrupt["interrupt_id"]]
    uri = f"rath://runs/{run['run_id']}"
    async with run_updates(client, inbox, uri) as next_update:
        await call(client, "interrupt_resolve", {"interrupt_id": interrupt["interrupt_id"], "action": "approve"})
        with anyio.fail_after(10):
            await next_update()
            while (await read_json(client, uri))["status"] != "succeeded":
                await next_update()
    done = await call(client, "run_wait", {"run_id": run["run_id"], "timeout_s": 10})
    assert done["status"] == "succeeded", done
    assert done["pending_interrupts"] == []
    return str(run["run_id"])


async def memory_is_recalled(client: Client) -> None:
    """What was remembered is found again by a query sharing its words, best hit first."""
    kept = await call(client, "memory_remember", {"content": "The user prefers picnics in the park.", "tags": ["pref"]})
    await call(client, "memory_remember", {"content": "Quarterly tax forms are due in April."})
    recalled = await call(client, "memory_recall", {"query": "picnic park", "k": 3})
    hits = recalled["hits"]
    assert hits and hits[0]["memory_id"] == kept["memory_id"], hits
    assert all(hit["score"] > 0 for hit in hits)


async def read_json(client: Client, uri: str) -> dict[str, Any]:
    (contents,) = (await client.read_resource(uri)).contents
    assert isinstance(contents, TextResourceContents) and contents.mime_type == "application/json"
    value = json.loads(contents.text)
    assert isinstance(value, dict)
    return value


async def run_key_scenario(client: Client, inbox: Inbox) -> None:
    """The whole scenario: every step asserts what a user would check."""
    tools = {tool.name for tool in (await client.list_tools()).tools}
    assert {"session_create", "session_fork", "session_merge", "run_start", "memory_recall"} <= tools
    session_id = await sessions_fork_and_merge(client)
    run_id = await approval_run_resumes_after_interrupt(client, session_id, inbox)
    await memory_is_recalled(client)

    assert (await read_json(client, f"rath://runs/{run_id}"))["status"] == "succeeded"

    message = await call_error(client, "session_get", {"session_id": "ses_does_not_exist"})
    assert "ses_does_not_exist" in message, message
