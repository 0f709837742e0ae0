"""Health, metrics and the audit trail over real HTTP, and the grant-refusal shape audit recognises.

A store that does not answer makes ``/health/ready`` 503 with the reason (a real ``OpsStore``
subclass that fails). ``/metrics`` needs ``metrics.read`` (403 ``insufficient_scope`` otherwise)
and counts runs, steps, tool calls and refusals. A grant refusal made by a later middleware (as
the grant enforcement does: an ``isError`` result naming the grant) is audited as ``refused``.
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import CallToolResult, TextContent

from rath_mcp.audit import ids_in, missing_grant
from rath_mcp.auth.remote import Remote
from rath_mcp.principal import GRANTS
from runtime import Runtime
from runtime.access.tokens import TokenService
from runtime.errors import StoreError
from runtime.store.core.access import CoreOpsStore
from tests.auth.conftest import rath_http

pytestmark = pytest.mark.anyio


class SilentStore(CoreOpsStore):
    """A store whose every query fails, as an unreachable database's would."""

    async def ping(self) -> None:
        raise StoreError("the PostgreSQL store at db:5432 is unreachable (connection refused)")


async def token(rt: Runtime, *grants: str) -> str:
    return (await TokenService(rt.store.tokens(), GRANTS).create("local", "default", list(grants)))[1]


async def test_health_needs_no_token_and_ready_says_why_the_store_does_not_answer(rt: Runtime) -> None:
    async with rath_http(rt) as served, httpx2.AsyncClient() as http:
        assert (await http.get(f"{served.base}/health/live")).json() == {"status": "live"}
        assert (await http.get(f"{served.base}/health/ready")).json() == {"status": "ready"}
    silent = SilentStore(rt.store.ex)  # type: ignore[attr-defined]

    def adjust(remote: Remote, _server: MCPServer) -> None:
        remote.rt = _WithOps(remote.rt, silent)  # type: ignore[assignment]

    async with rath_http(rt, adjust=adjust) as served, httpx2.AsyncClient() as http:
        answer = await http.get(f"{served.base}/health/ready")
    assert answer.status_code == 503
    assert answer.json()["reason"] == (
        "the store does not answer: the PostgreSQL store at db:5432 is unreachable (connection refused)"
    )


class _WithOps:
    """The runtime, with its store's ``ops()`` replaced (what the gate asks readiness of)."""

    def __init__(self, rt: Runtime, ops: CoreOpsStore) -> None:
        self._rt, self._ops = rt, ops
        self.store = self

    def ops(self) -> CoreOpsStore:
        return self._ops

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rt, name)


async def test_metrics_need_metrics_read_and_count_runs_steps_tools_and_refusals(rt: Runtime) -> None:
    reader, other = await token(rt, "metrics.read"), await token(rt, "run.create", "run.read", "session.read")
    async with rath_http(rt) as served:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {other}"}) as http,
            Client(streamable_http_client(served.mcp, http_client=http)) as connected,
        ):
            run = await connected.call_tool("run_start", {"workflow": "echo", "message": "hi", "wait_s": 20})
            assert not run.is_error and run.structured_content is not None
            assert run.structured_content["status"] == "succeeded"
            forbidden = await http.get(f"{served.base}/metrics")
        assert forbidden.status_code == 403
        challenge = forbidden.headers["www-authenticate"]
        assert 'error="insufficient_scope"' in challenge and 'scope="metrics.read"' in challenge
        async with httpx2.AsyncClient() as anonymous:
            assert (await anonymous.get(f"{served.base}/mcp")).status_code == 401
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {reader}"}) as http:
            text = (await http.get(f"{served.base}/metrics")).text
    assert 'rath_runs{status="succeeded"} 1.0' in text and "rath_queue_depth 0.0" in text
    assert 'rath_step_duration_seconds_count{workflow="echo"}' in text
    assert 'rath_tool_calls_total{outcome="ok",tool="run_start"} 1.0' in text
    assert 'rath_tool_call_duration_seconds_count{tool="run_start"} 1.0' in text
    assert 'rath_refusals_total{reason="insufficient_scope"} 1.0' in text
    assert 'rath_refusals_total{reason="missing_token"}' in text


async def refuse_memory_writes(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """A grant check shaped like the MCP layer's: an isError result naming the grant, nothing run."""
    if ctx.method == "tools/call" and (ctx.params or {}).get("name") == "memory_remember":
        text = "memory_remember needs the grant memory.write, which this token does not carry"
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
    return await call_next(ctx)


async def test_writes_and_grant_refusals_are_audited_with_ids_only(rt: Runtime) -> None:
    secret = await token(rt, "admin")

    def adjust(_remote: Remote, server: MCPServer) -> None:
        server.middleware.append(refuse_memory_writes)  # after the audit middleware, as any other is

    async with (
        rath_http(rt, adjust=adjust) as served,
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}) as http,
        Client(streamable_http_client(served.mcp, http_client=http)) as connected,
    ):
        made = await connected.call_tool("session_create", {"message": "my password is hunter2"})
        assert made.structured_content is not None
        session_id = made.structured_content["session_id"]
        await connected.call_tool("session_append", {"session_id": session_id, "content": "api key sk-123"})
        await connected.call_tool("session_get", {"session_id": session_id})  # a read: not audited
        refused = await connected.call_tool("memory_remember", {"content": "token sk-456"})
        assert refused.is_error
    records = await rt.store.audit().recent(20)
    assert [(r.action, r.outcome) for r in records] == [
        ("session_create", "ok"),
        ("session_append", "ok"),
        ("memory_remember", "refused"),
    ]
    assert records[0].targets == (session_id,) and session_id in records[1].targets and len(records[1].targets) == 2
    assert records[2].reason == "missing grant memory.write"
    assert all(r.tenant == "local" and r.project == "default" and r.method == "token" for r in records)
    shown = repr(records)
    assert "hunter2" not in shown and "sk-123" not in shown and "sk-456" not in shown and secret not in shown


def test_only_ids_are_taken_as_targets_and_grant_refusals_are_recognised() -> None:
    assert ids_in({"session_id": "ses_0190f3c2a1b4e5f60718293a", "content": "ses_0190f3c2a1b4e5f60718293b"}) == [
        "ses_0190f3c2a1b4e5f60718293a"
    ]
    assert ids_in({"run_id": "not an id", "session_ids": ["ses_0190f3c2a1b4e5f60718293a", 3]}) == [
        "ses_0190f3c2a1b4e5f60718293a"
    ]
    assert missing_grant("session_fork needs the grant session.write") == "session.write"
    assert missing_grant("session ses_x not found") is None


async def test_the_real_grant_check_refuses_a_token_without_its_grant_and_the_refusal_is_audited(rt: Runtime) -> None:
    secret = await token(rt, "session.read")  # no session.write
    async with (
        rath_http(rt) as served,
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}) as http,
        Client(streamable_http_client(served.mcp, http_client=http)) as connected,
    ):
        refused = await connected.call_tool("session_create", {"message": "not written"})
        assert refused.is_error
        first = refused.content[0]
        assert isinstance(first, TextContent) and "needs the grant 'session.write'" in first.text
        listed = await connected.call_tool("session_list", {})
        assert not listed.is_error and listed.structured_content is not None
        assert listed.structured_content["sessions"] == []  # nothing was written
    records = await rt.store.audit().recent(20)
    assert [(r.action, r.outcome, r.reason) for r in records] == [
        ("session_create", "refused", "missing grant session.write")
    ]
