"""A session's content needs ``session.read``, through whichever tool reaches it (CONTRACT §8).

Real tokens (``--auth token``) over Streamable HTTP on 127.0.0.1, through the real SDK client. A
token holding every other grant is refused, naming ``session.read``, by every tool that takes a
session id (found in ``tools/list``'s input schemas, so a new one is covered without a line here)
and by every answer shaped from a run: tools whose output schema carries a run's ``result``, the
run's events, interrupts and effects, ``rath://runs/…``, the ``review_run`` prompt and the MCP
task methods. Nothing is written but the audit trail, which records each refusal; the secret the
session holds appears in no answer. With ``session.read`` added the same calls go through.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from rath_mcp.principal import GRANTS
from runtime import Runtime
from runtime.access.tokens import TokenService
from runtime.store.sqlite.backend import sqlite_database
from tests.auth.conftest import Served, rath_http
from tests.mcp.conftest import call, text_of
from tests.scope.world import ambiguous_effect, dump
from tests.tasks._raw import Handshake, RpcError

pytestmark = pytest.mark.anyio

SECRET = "the launch code is 7-4-1-1"
READ = "session.read"
#: Every grant but session.read (and admin, which holds it).
ALL_BUT_READ = [g for g in GRANTS if g not in (READ, "admin")]
#: Arguments that name a session: the tools declaring one of these are walked.
SESSION_ARGS = ("session_id", "session_ids")
#: Answers shaped from a run whose output schema does not say so (their entries are free-form dicts):
#: step.text events, interrupt prompts, effect results.
RUN_SHAPED = {"run_events", "interrupt_list", "effect_list"}


async def token(rt: Runtime, *grants: str) -> str:
    return (await TokenService(rt.store.tokens(), GRANTS).create("local", "default", list(grants)))[1]


@asynccontextmanager
async def connected(served: Served, secret: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}) as http,
        Client(streamable_http_client(served.mcp, http_client=http)) as client,
    ):
        yield client


def refused_for_content(tool: str, text: str) -> bool:
    return f"needs the grant '{READ}'" in text and tool in text and SECRET not in text


def stored(rt: Runtime) -> dict[str, list[str]]:
    """Every row of the store but the audit trail's (refusals are recorded there, and counted in
    ``sqlite_sequence``)."""
    rows = dump(sqlite_database(rt.store).path)
    kept = {table: values for table, values in rows.items() if not table.startswith("audit")}
    kept["sqlite_sequence"] = [row for row in kept.get("sqlite_sequence", []) if "'audit_log'" not in row]
    return kept


async def test_a_run_or_a_memory_commit_does_not_read_a_session_without_session_read(rt: Runtime) -> None:
    admin = await token(rt, "admin")
    runner, memorizer = await token(rt, "run.create", "run.read"), await token(rt, "memory.write", "memory.read")
    async with rath_http(rt) as served:
        async with connected(served, admin) as client:
            session = (await call(client, "session_create", message=SECRET))["session_id"]
        before = stored(rt)
        async with connected(served, runner) as client:
            echoed = await client.call_tool("run_start", {"workflow": "echo", "session_id": session, "wait_s": 20})
        assert echoed.is_error and refused_for_content("run_start", text_of(echoed)), text_of(echoed)
        async with connected(served, memorizer) as client:
            committed = await client.call_tool("memory_commit", {"session_id": session})
            assert committed.is_error and refused_for_content("memory_commit", text_of(committed))
            recalled = await call(client, "memory_recall", query="launch code")
        assert recalled["hits"] == [] and SECRET not in json.dumps(recalled)
        assert stored(rt) == before  # no run, no archive, no memory item
    records = [r for r in await rt.store.audit().recent(20) if r.outcome == "refused"]
    assert [(r.action, r.reason, session in r.targets) for r in records] == [
        ("run_start", f"missing grant {READ}", True),
        ("memory_commit", f"missing grant {READ}", True),
    ]


def value_for(name: str, schema: dict[str, Any], sessions: list[str]) -> Any:
    """A valid value of a tool argument from its JSON schema (``session_id(s)``: the world's sessions)."""
    if name == "session_id":
        return sessions[0]
    if name == "session_ids":
        return sessions
    if name == "workflow":
        return "echo"
    if "enum" in schema:
        return schema["enum"][0]
    kinds = {"string": "x", "integer": schema.get("minimum", 1), "boolean": False, "array": [], "object": {}}
    kind = schema.get("type")
    assert kind in kinds, f"give argument {name} ({schema}) a value in value_for"
    return kinds[kind]


async def test_every_tool_taking_a_session_id_needs_session_read_and_writes_nothing_without_it(rt: Runtime) -> None:
    admin, lacking = await token(rt, "admin"), await token(rt, *ALL_BUT_READ)
    reader = await token(rt, *ALL_BUT_READ, READ)
    async with rath_http(rt) as served:
        async with connected(served, admin) as client:
            sessions = [(await call(client, "session_create", message=SECRET))["session_id"] for _ in range(2)]
            box = await rt.sandboxes.get((await rt.sessions.info(sessions[0])).placement)
            await box.write_file("x", "a workspace file, for artifact_save")  # the path value_for gives
            tools = (await client.list_tools()).tools
        calls: dict[str, dict[str, Any]] = {}
        for tool in tools:
            properties: dict[str, Any] = tool.input_schema.get("properties", {})
            if not any(arg in properties for arg in SESSION_ARGS):
                continue
            wanted = set(tool.input_schema.get("required", [])) | (set(SESSION_ARGS) & set(properties))
            calls[tool.name] = {arg: value_for(arg, properties[arg], sessions) for arg in sorted(wanted)}
        assert {"run_start", "memory_commit", "session_get", "session_append", "session_merge"} <= set(calls)
        before = stored(rt)
        async with connected(served, lacking) as client:
            for name, arguments in calls.items():
                result = await client.call_tool(name, arguments)
                assert result.is_error and refused_for_content(name, text_of(result)), (name, text_of(result))
        assert stored(rt) == before
        records = [r for r in await rt.store.audit().recent(100) if r.outcome == "refused"]
        assert sorted(r.action for r in records) == sorted(calls)
        assert all(r.reason == f"missing grant {READ}" and sessions[0] in r.targets for r in records)
        async with connected(served, reader) as client:  # the grant is all that was missing
            for name, arguments in calls.items():
                result = await client.call_tool(name, arguments)
                assert not result.is_error, (name, text_of(result))


def carries_a_run_result(schema: Any) -> bool:
    """Whether an output schema holds a ``result`` property anywhere (a run summary, a delegation)."""
    if isinstance(schema, dict):
        properties = schema.get("properties")
        if isinstance(properties, dict) and "result" in properties:
            return True
        return any(carries_a_run_result(v) for v in schema.values())
    if isinstance(schema, list):
        return any(carries_a_run_result(v) for v in schema)
    return False


async def test_answers_shaped_from_a_run_need_session_read(rt: Runtime) -> None:
    admin, lacking = await token(rt, "admin"), await token(rt, *ALL_BUT_READ)
    async with rath_http(rt) as served:
        async with connected(served, admin) as client:
            session = (await call(client, "session_create", message=SECRET))["session_id"]
            done = await call(client, "run_start", workflow="echo", session_id=session, wait_s=20)
            assert done["status"] == "succeeded" and SECRET in json.dumps(done)
            waiting = await call(client, "run_start", workflow="approval", input={"draft": SECRET}, wait_s=20)
            assert waiting["status"] == "waiting"
            tools = (await client.list_tools()).tools
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        _, effect = await ambiguous_effect(rt, "local", "default")
        run, interrupt = done["run_id"], waiting["pending_interrupts"][0]["interrupt_id"]
        valid: dict[str, dict[str, Any]] = {
            "run_start": {"workflow": "echo", "message": "m"},
            "run_get": {"run_id": run},
            "run_wait": {"run_id": run, "timeout_s": 0},
            "run_cancel": {"run_id": waiting["run_id"]},
            "run_list": {},
            "run_events": {"run_id": run},
            "run_fork": {"run_id": run},
            "interrupt_list": {},
            "interrupt_resolve": {"interrupt_id": interrupt, "action": "approve"},
            "effect_list": {},
            "effect_resolve": {"effect_id": effect, "outcome": "applied", "result": 1},
            "delegate": {"task": "t", "workflow": "echo", "wait_s": 0},
        }
        shaped = {t.name for t in tools if carries_a_run_result(t.output_schema)} | RUN_SHAPED
        assert {"run_get", "run_list", "delegate", "run_fork", "interrupt_resolve"} <= shaped
        assert not shaped - set(valid), f"give {sorted(shaped - set(valid))} a call in valid"
        runs = [t.replace("{run_id}", run) for t in templates if t.startswith("rath://runs/")]
        before = stored(rt)
        async with connected(served, lacking) as client:
            for name in sorted(shaped):
                result = await client.call_tool(name, valid[name])
                assert result.is_error and refused_for_content(name, text_of(result)), (name, text_of(result))
            for uri in runs:
                with pytest.raises(MCPError, match=re.escape(f"'{READ}'")):
                    await client.read_resource(uri)
            with pytest.raises(MCPError, match=re.escape(f"'{READ}'")):
                await client.get_prompt("review_run", {"run_id": run})
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {lacking}"}) as http:
            tasks = await Handshake(http, served.mcp).open()
            for method, params in [("tasks/get", {"taskId": run}), ("tasks/result", {"taskId": run})]:
                with pytest.raises(RpcError, match=re.escape(f"'{READ}'")):
                    await tasks.request(method, params)
            with pytest.raises(RpcError, match=re.escape(f"'{READ}'")):
                await tasks.request("tasks/list", {})
        assert len(runs) == 2 and stored(rt) == before
