"""The grant matrix: every tool, resource, prompt, completion and subscription refused without each
of its grants, the refusal naming it, and the store exactly as before (every table's rows compared).

Generated from the server's own lists, and from every method it serves: a tool, prompt, template
argument or method missing from ``rath_mcp.grants``' tables fails here.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import ResourceTemplateReference

from rath_mcp import grants
from rath_mcp.principal import GRANTS, Principal
from rath_mcp.sdk import lowlevel
from rath_mcp.server import build_server
from runtime import Runtime
from runtime.ids import new_id
from runtime.store.sqlite.backend import sqlite_database
from tests.mcp.conftest import text_of
from tests.scope.world import A_PROJECT, A_TENANT, World, dump, import_line_with_parent, populate

pytestmark = pytest.mark.anyio

#: A valid call of each tool on scope A's world (placeholders: ``{kind}`` is the world's first id of it).
VALID: dict[str, dict[str, Any]] = {
    "session_create": {"message": "hi"},
    "session_append": {"session_id": "{session}", "content": "x"},
    "session_get": {"session_id": "{session}"},
    "session_list": {},
    "session_fork": {"session_id": "{session}"},
    "session_merge": {"session_ids": ["{session}", "{session2}"]},
    "session_detach": {"session_id": "{session}"},
    "session_lineage": {"session_id": "{session}"},
    "session_export": {"session_id": "{session}"},
    "session_import": {"jsonl": "{import}"},
    "workflow_list": {},
    "run_start": {"workflow": "echo", "message": "m"},
    "delegate": {"task": "t", "workflow": "echo", "wait_s": 0},
    "run_fork": {"run_id": "{done_run}"},
    "run_get": {"run_id": "{run}"},
    "run_wait": {"run_id": "{run}", "timeout_s": 0},
    "run_list": {},
    "run_events": {"run_id": "{run}"},
    "run_checkpoints": {"run_id": "{run}"},
    "run_cancel": {"run_id": "{run}"},
    "interrupt_list": {},
    "interrupt_resolve": {"interrupt_id": "{interrupt}", "action": "approve"},
    "effect_list": {},
    "effect_resolve": {"effect_id": "{effect}", "outcome": "applied", "result": 1},
    "memory_remember": {"content": "c"},
    "memory_recall": {"query": "launch"},
    "memory_list": {},
    "memory_commit": {"session_id": "{session}"},
    "memory_forget": {"memory_id": "{memory}"},
    "artifact_save": {"session_id": "{session}", "path": "report.txt"},
    "artifact_list": {},
    "artifact_get": {"artifact_id": "{artifact}"},
    "artifact_delete": {"artifact_id": "{artifact}"},
    "schedule_create": {"workflow": "echo", "cron": "0 * * * *"},
    "schedule_list": {},
    "schedule_update": {"schedule_id": "{schedule}", "paused": True},
    "schedule_delete": {"schedule_id": "{schedule}"},
}

#: Methods the test reaches through a list (tools, resources, prompts, completions, subscriptions).
REACHED = {"tools/call", "resources/read", "resources/subscribe", "resources/unsubscribe", "prompts/get"}
REACHED |= {"completion/complete", "subscriptions/listen"}


def placeholders(world: World) -> dict[str, str]:
    return {
        "{session}": world.first("session"),
        "{session2}": world.ids["session"][1],
        "{run}": world.waiting_run,
        "{done_run}": world.ids["run"][1],
        "{interrupt}": world.interrupt,
        "{effect}": world.first("effect"),
        "{memory}": world.first("memory"),
        "{artifact}": world.first("artifact"),
        "{schedule}": world.first("schedule"),
        "{import}": import_line_with_parent(world.first("session"), new_id("ses")),
    }


def filled(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, str):
        return values.get(value, value)
    if isinstance(value, list):
        return [filled(v, values) for v in value]
    if isinstance(value, dict):
        return {k: filled(v, values) for k, v in value.items()}
    return value


def lacking(grant: str) -> Principal:
    """A caller in scope A with every grant but ``grant`` (and not admin)."""
    others = frozenset(g for g in GRANTS if g not in (grant, "admin"))
    return Principal(actor="matrix", tenant=A_TENANT, project=A_PROJECT, grants=others, method="token")


async def make_world(home: Path) -> World:
    admin = Principal.local(A_TENANT, A_PROJECT)
    async with Runtime.open(home) as rt, Client(build_server(rt, local=admin), mode="legacy") as client:
        return await populate(client, rt)


async def test_every_method_the_server_serves_has_a_grant_or_is_free(rt: Runtime) -> None:
    served = set(lowlevel(build_server(rt))._request_handlers)
    unnamed = served - grants.FREE_METHODS - set(grants.METHOD_GRANTS) - REACHED
    assert not unnamed, f"give {sorted(unnamed)} a grant in rath_mcp/grants.py (and a case here)"


async def refused_tools(rt: Runtime, world: World, era: str) -> None:
    values = placeholders(world)
    async with Client(build_server(rt), mode=era) as admin:
        listed = sorted(t.name for t in (await admin.list_tools()).tools)
    missing = [t for t in listed if t not in grants.TOOL_GRANTS or t not in VALID]
    assert not missing, f"give {missing} a grant in rath_mcp/grants.py TOOL_GRANTS and a valid call in VALID"
    for tool in listed:
        for grant in grants.TOOL_GRANTS[tool]:  # each of its grants is needed
            async with Client(build_server(rt, local=lacking(grant)), mode=era) as client:
                result = await client.call_tool(tool, filled(VALID[tool], values))
            text = text_of(result)
            assert result.is_error and f"'{grant}'" in text and tool in text, (tool, text)


async def refused_protocol(rt: Runtime, world: World, era: str) -> None:
    values = {"{session}": world.first("session"), "{run}": world.waiting_run, "{memory}": world.first("memory")}
    async with Client(build_server(rt), mode=era) as admin:
        templates = [t.uri_template for t in (await admin.list_resource_templates()).resource_templates]
        statics = [str(r.uri) for r in (await admin.list_resources()).resources]
        prompts = [(p.name, [a.name for a in p.arguments or []]) for p in (await admin.list_prompts()).prompts]
    params = {"{session_id}": values["{session}"], "{run_id}": values["{run}"], "{memory_id}": values["{memory}"]}
    params["{name}"] = "echo"
    uris = list(statics)
    for template in templates:
        for name, value in params.items():
            template = template.replace(name, value)
        uris.append(template)
    for template in templates:
        for argument in re.findall(r"{(\w+)}", template):
            assert argument in grants.COMPLETION_GRANTS, f"give completing {argument} a grant in COMPLETION_GRANTS"
    for uri in uris:
        needed = grants.resource_grants(uri)
        assert "admin" not in needed, f"give {uri} a grant in rath_mcp/grants.py RESOURCE_GRANTS"
        for grant in needed:
            async with Client(build_server(rt, local=lacking(grant)), mode=era) as client:
                with pytest.raises(MCPError, match=re.escape(f"'{grant}'")):
                    await client.read_resource(uri)
    for name, arguments in prompts:
        needed = grants.PROMPT_GRANTS.get(name, ("admin",))
        assert "admin" not in needed, f"give prompt {name} a grant in rath_mcp/grants.py PROMPT_GRANTS"
        args = {a: "echo" if a == "workflow" else world.waiting_run if a == "run_id" else "x" for a in arguments}
        for grant in needed:
            async with Client(build_server(rt, local=lacking(grant)), mode=era) as client:
                with pytest.raises(MCPError, match=re.escape(f"'{grant}'")):
                    await client.get_prompt(name, args)
    for argument, grant in grants.COMPLETION_GRANTS.items():
        ref = ResourceTemplateReference(type="ref/resource", uri="rath://runs/{run_id}")
        async with Client(build_server(rt, local=lacking(grant)), mode=era) as client:
            with pytest.raises(MCPError, match=re.escape(f"'{grant}'")):
                await client.complete(ref, {"name": argument, "value": ""})
    await refused_subscriptions(rt, world, era)


async def refused_subscriptions(rt: Runtime, world: World, era: str) -> None:
    uri = f"rath://runs/{world.waiting_run}"
    async with Client(build_server(rt, local=lacking("run.read")), mode=era) as client:
        if era == "legacy":
            with warnings.catch_warnings(), pytest.raises(MCPError, match=r"'run\.read'"):
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.subscribe_resource(uri)
            return
        with pytest.raises(MCPError, match=r"'run\.read'"):
            async with client.listen(resource_subscriptions=[uri]) as events:
                await anext(events)


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_each_call_without_its_grant_is_refused_naming_it_and_writes_nothing(tmp_path: Path, era: str) -> None:
    home = tmp_path / "home"
    world = await make_world(home)
    async with Runtime.open(home, workers=0) as rt:  # no worker: nothing but the calls could write
        with rt.scope(A_TENANT, A_PROJECT):
            db = sqlite_database(rt.store).path
            before = dump(db)
            await refused_tools(rt, world, era)
            await refused_protocol(rt, world, era)
            assert dump(db) == before
            granted = frozenset(grants.TOOL_GRANTS["session_create"])
            only = Principal(actor="one", tenant=A_TENANT, project=A_PROJECT, grants=granted)
            async with Client(build_server(rt, local=only), mode=era) as client:  # the grant alone is enough
                assert not (await client.call_tool("session_create", {"message": "ok"})).is_error
            assert dump(db) != before
