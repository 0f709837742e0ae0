"""Durable runs as MCP Tasks, driven with raw JSON-RPC over Streamable HTTP against ``rath-mcp serve``.

Both eras: the 2025-11-25 utility (``task`` on ``tools/call``, ``tasks/get|result|list|cancel``,
an interrupt asked through ``tasks/result`` as an elicitation tied to the task) and the
2026-07-28 extension (server-directed creation, ``tasks/get`` carrying input requests,
``tasks/update``, ``tasks/cancel``, ``-32021`` without the extension). Tasks outlive the server
process and any process on the store answers for any task.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.tasks._raw import RELATED, Handshake, Modern, RpcError
from tests.transports._servers import RunningServer, http_server

pytestmark = pytest.mark.anyio
APPROVAL = {"workflow": "approval", "message": "a haiku about tasks"}


@asynccontextmanager
async def serving(home: Path) -> AsyncIterator[tuple[RunningServer, httpx.AsyncClient]]:
    async with http_server("http", home) as server, httpx.AsyncClient(timeout=60) as http:
        yield server, http


async def approve(request: dict[str, Any]) -> dict[str, Any]:
    assert request["method"] == "elicitation/create"
    return {"action": "accept", "content": {"decision": "approve", "reason": "looks good"}}


async def test_a_handshake_era_task_is_created_polled_asked_through_tasks_result_and_finished(tmp_path: Path) -> None:
    async with serving(tmp_path / "home") as (server, http):
        client = await Handshake(http, f"{server.base}/mcp").open()
        assert client.capabilities["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        tools = {t["name"]: t for t in (await client.request("tools/list"))["tools"]}
        assert tools["run_start"]["execution"] == {"taskSupport": "optional"}
        assert tools["delegate"]["execution"] == {"taskSupport": "optional"}
        assert "execution" not in tools["run_get"]

        created = await client.request(
            "tools/call",
            {"name": "run_start", "arguments": APPROVAL, "task": {"ttl": 60000}, "_meta": {"progressToken": "p1"}},
        )
        task = created["task"]
        # the run's status when the answer is made: its worker may already have reached the approval's question
        assert task["taskId"].startswith("run_") and task["status"] in ("working", "input_required")
        assert task["ttl"] == 60000
        assert task["createdAt"].endswith("Z") and task["pollInterval"] > 0

        waiting = await client.poll(task["taskId"], lambda t: t["status"] == "input_required")
        assert "waits on a person" in waiting["statusMessage"] and "Approve this draft" in waiting["statusMessage"]

        asked: list[dict[str, Any]] = []

        async def answer(request: dict[str, Any]) -> dict[str, Any]:
            asked.append(request)
            return await approve(request)

        result = await client.request("tasks/result", {"taskId": task["taskId"]}, answer=answer)
        assert asked and asked[0]["params"]["_meta"][RELATED] == {"taskId": task["taskId"]}
        assert result["_meta"][RELATED] == {"taskId": task["taskId"]}
        assert result["isError"] is False and result["structuredContent"]["status"] == "succeeded"
        assert result["structuredContent"]["run_id"] == task["taskId"]
        progress = [n for n in client.notifications if n["method"] == "notifications/progress"]
        assert progress and all(n["params"]["_meta"][RELATED] == {"taskId": task["taskId"]} for n in progress)
        assert {n["params"]["progressToken"] for n in progress} == {"p1"}

        done = await client.request("tasks/get", {"taskId": task["taskId"]})
        assert done["status"] == "completed" and done["ttl"] == 60000 and "pollInterval" not in done
        listed = await client.request("tasks/list")
        assert task["taskId"] in [t["taskId"] for t in listed["tasks"]]
        with pytest.raises(RpcError) as terminal:
            await client.request("tasks/cancel", {"taskId": task["taskId"]})
        assert terminal.value.code == -32602 and "completed" in terminal.value.message


async def test_handshake_era_cancel_list_pages_and_bad_requests(tmp_path: Path) -> None:
    async with serving(tmp_path / "home") as (server, http):
        client = await Handshake(http, f"{server.base}/mcp").open()
        ids = []
        for _ in range(3):
            created = await client.request("tools/call", {"name": "run_start", "arguments": APPROVAL, "task": {}})
            ids.append(created["task"]["taskId"])
        cancelled = await client.request("tasks/cancel", {"taskId": ids[0]})
        assert cancelled["status"] == "cancelled" and cancelled["taskId"] == ids[0]
        result = await client.request("tasks/result", {"taskId": ids[0]})
        assert result["structuredContent"]["status"] == "cancelled"

        seen: list[str] = []
        page = await client.request("tasks/list")
        seen += [t["taskId"] for t in page["tasks"]]
        while "nextCursor" in page:
            page = await client.request("tasks/list", {"cursor": page["nextCursor"]})
            seen += [t["taskId"] for t in page["tasks"]]
        assert set(ids) <= set(seen) and len(seen) == len(set(seen))

        for method, params in [
            ("tasks/get", {"taskId": "run_0000000000000000000000"}),
            ("tasks/list", {"cursor": "not a cursor"}),
        ]:
            with pytest.raises(RpcError) as refused:
                await client.request(method, params)
            assert refused.value.code == -32602
        with pytest.raises(RpcError) as not_a_task_tool:
            await client.request("tools/call", {"name": "run_get", "arguments": {"run_id": ids[1]}, "task": {}})
        assert not_a_task_tool.value.code == -32601
        with pytest.raises(RpcError) as bad_input:
            await client.request("tools/call", {"name": "run_start", "arguments": {"workflow": "nope"}, "task": {}})
        assert bad_input.value.code == -32602 and "nope" in bad_input.value.message
        plain = await client.request("tools/call", {"name": "run_start", "arguments": APPROVAL})
        assert "task" not in plain and plain["structuredContent"]["run_id"].startswith("run_")


async def test_a_2026_task_carries_its_input_requests_and_is_answered_with_tasks_update(tmp_path: Path) -> None:
    async with serving(tmp_path / "home") as (server, http):
        client = Modern(http, f"{server.base}/mcp")
        created = await client.request(
            "tools/call", {"name": "delegate", "arguments": {"task": "x", "workflow": "approval"}}
        )
        # the run's status when the answer is made: its worker may already have reached the approval's question
        assert created["resultType"] == "task" and created["status"] in ("working", "input_required")
        task_id = created["taskId"]
        assert created["ttlMs"] is None and created["pollIntervalMs"] > 0

        waiting = await client.poll(task_id, lambda t: t["status"] == "input_required")
        assert waiting["resultType"] == "complete"
        ((key, request),) = waiting["inputRequests"].items()
        assert key.startswith("int_") and request["method"] == "elicitation/create"
        assert "decision" in request["params"]["requestedSchema"]["properties"]

        ack = await client.request(
            "tasks/update",
            {"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"decision": "approve"}}}},
        )
        assert ack["resultType"] == "complete"
        done = await client.poll(task_id, lambda t: t["status"] == "completed")
        assert done["result"]["structuredContent"]["status"] == "succeeded"
        assert done["result"]["structuredContent"]["run_id"] == task_id
        assert "answer" in done["result"]["structuredContent"]  # delegate's own result shape

        second = await client.request("tools/call", {"name": "run_start", "arguments": APPROVAL})
        assert (await client.request("tasks/cancel", {"taskId": second["taskId"]}))["resultType"] == "complete"
        assert (await client.poll(second["taskId"], lambda t: t["status"] == "cancelled"))["status"] == "cancelled"
        assert (await client.request("tasks/cancel", {"taskId": "run_0000000000000000000000"}))[
            "resultType"
        ] == "complete"
        assert (await client.request("tasks/update", {"taskId": "run_x", "inputResponses": {}}))[
            "resultType"
        ] == "complete"
        with pytest.raises(RpcError) as unknown:
            await client.request("tasks/get", {"taskId": "run_0000000000000000000000"})
        assert unknown.value.code == -32602
        for gone in ("tasks/result", "tasks/list"):
            with pytest.raises(RpcError) as removed:
                await client.request(gone, {"taskId": task_id})
            assert removed.value.code == -32601


async def test_a_2026_client_that_did_not_declare_the_extension_gets_no_task_and_32021(tmp_path: Path) -> None:
    async with serving(tmp_path / "home") as (server, http):
        client = Modern(http, f"{server.base}/mcp", declare_tasks=False)
        plain = await client.request("tools/call", {"name": "run_start", "arguments": APPROVAL})
        assert plain["resultType"] == "complete" and plain["structuredContent"]["run_id"].startswith("run_")
        with pytest.raises(RpcError) as refused:
            await client.request("tasks/get", {"taskId": plain["structuredContent"]["run_id"]})
        assert refused.value.code == -32021
        assert refused.value.data["requiredCapabilities"] == {"extensions": {"io.modelcontextprotocol/tasks": {}}}


async def test_tasks_outlive_the_server_and_any_server_on_the_store_answers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with serving(home) as (server, http):
        legacy = await Handshake(http, f"{server.base}/mcp").open()
        old = (await legacy.request("tools/call", {"name": "run_start", "arguments": APPROVAL, "task": {"ttl": 5000}}))[
            "task"
        ]
        modern = await Modern(http, f"{server.base}/mcp").request(
            "tools/call", {"name": "run_start", "arguments": APPROVAL}
        )
        await legacy.poll(old["taskId"], lambda t: t["status"] == "input_required")
    # restarted: the same ids answer, and answering through the task finishes each run
    async with serving(home) as (first, http), http_server("http", home) as second:
        legacy = await Handshake(http, f"{second.base}/mcp").open()
        again = await legacy.request("tasks/get", {"taskId": old["taskId"]})
        assert again["status"] == "input_required" and again["ttl"] == 5000 and again["createdAt"] == old["createdAt"]
        result = await legacy.request("tasks/result", {"taskId": old["taskId"]}, answer=approve)
        assert result["structuredContent"]["status"] == "succeeded"

        client = Modern(http, f"{first.base}/mcp")
        waiting = await client.poll(modern["taskId"], lambda t: t["status"] == "input_required")
        (key,) = waiting["inputRequests"]
        answer = {key: {"action": "accept", "content": {"decision": "approve"}}}
        await Modern(http, f"{second.base}/mcp").request(
            "tasks/update", {"taskId": modern["taskId"], "inputResponses": answer}
        )
        done = await client.poll(modern["taskId"], lambda t: t["status"] == "completed")
        assert done["result"]["structuredContent"]["run_id"] == modern["taskId"]
