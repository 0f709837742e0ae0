"""Isolation: a caller of scope B finds nothing of scope A, through every tool, resource, subscription
and completion the server offers, and what it is told reads exactly as for an id that never existed.

The walk is generated from the server's own ``tools/list``, ``resources/templates/list``,
``resources/list`` and ``prompts/list``: a tool without a probe below fails the test, so a new tool
cannot be forgotten. Both callers are on one server over Streamable HTTP (the principal comes from
a test-only ASGI middleware, see ``conftest.py``), so they share its subscription bus as well.
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import PromptReference, ResourceTemplateReference

from runtime import Runtime
from runtime.ids import new_id
from tests.mcp.conftest import call, text_of
from tests.scope.conftest import caller, client_as, http_serving
from tests.scope.world import A_PROJECT, A_TENANT, B_PROJECT, B_TENANT, World, import_line_with_parent, populate

pytestmark = pytest.mark.anyio

A = caller(A_TENANT, A_PROJECT, "admin")
B = caller(B_TENANT, B_PROJECT, "admin")

#: Placeholders of the probes: one of A's ids of that kind (or, to compare, a fresh id of the kind).
KINDS = {
    "{session}": "ses",
    "{run}": "run",
    "{interrupt}": "int",
    "{effect}": "eff",
    "{memory}": "mem",
    "{artifact}": "art",
    "{schedule}": "sch",
    "{uri}": "",
}

#: Tools that name an object: each argument set is tried with each of A's ids of the kind it names.
BY_ID: dict[str, list[dict[str, Any]]] = {
    "session_get": [{"session_id": "{session}"}],
    "session_append": [{"session_id": "{session}", "content": "B was here"}],
    "session_fork": [{"session_id": "{session}"}, {"session_id": "{session}", "isolate_workspace": True}],
    "session_merge": [{"session_ids": ["{session}", "{own_session}"]}, {"session_ids": ["{own_session}", "{session}"]}],
    "session_detach": [{"session_id": "{session}"}],
    "session_lineage": [{"session_id": "{session}"}],
    "session_export": [{"session_id": "{session}"}],
    "session_import": [{"jsonl": "{import_with_parent_session}"}],
    "run_get": [{"run_id": "{run}"}],
    "run_wait": [{"run_id": "{run}", "timeout_s": 0}],
    "run_events": [{"run_id": "{run}"}],
    "run_checkpoints": [{"run_id": "{run}"}],
    "run_cancel": [{"run_id": "{run}"}],
    "run_fork": [{"run_id": "{run}"}],
    "run_start": [{"workflow": "echo", "session_id": "{session}"}],
    "interrupt_list": [{"run_id": "{run}"}],
    "interrupt_resolve": [{"interrupt_id": "{interrupt}", "action": "approve"}],
    "effect_resolve": [{"effect_id": "{effect}", "outcome": "applied", "result": 1}],
    "memory_forget": [{"memory_id": "{memory}"}, {"uri": "{uri}"}],
    "memory_commit": [{"session_id": "{session}"}],
    "artifact_save": [{"session_id": "{session}", "path": "report.txt"}],
    "artifact_get": [{"artifact_id": "{artifact}"}],
    "artifact_delete": [{"artifact_id": "{artifact}"}],
    "schedule_update": [
        {"schedule_id": "{schedule}", "paused": True},
        {"schedule_id": "{schedule}", "cron": "5 * * * *"},
    ],
    "schedule_delete": [{"schedule_id": "{schedule}"}],
}

#: Tools that name no object of A (or that list): whatever they answer B must mention none of A's ids.
LISTING: dict[str, list[dict[str, Any]]] = {
    "session_create": [{"message": "B's own"}],
    "session_list": [{}],
    "run_list": [{}, {"status": "waiting"}],
    "interrupt_list": [{}],
    "effect_list": [{}, {"status": None}],
    "workflow_list": [{}],
    "memory_recall": [{"query": "secret launch code"}, {"query": "more of A", "scope": "session"}],
    "memory_list": [{}, {"prefix": "memory://user/"}, {"prefix": "memory://session/"}],
    "memory_remember": [{"content": "B's note", "path": "notes/launch"}],
    "delegate": [{"task": "B's task", "workflow": "echo", "wait_s": 0}],
    "run_start": [{"workflow": "echo", "message": "B's run"}],
    "artifact_list": [{}],
    "schedule_list": [{}],
    "schedule_create": [{"workflow": "echo", "cron": "0 * * * *"}],
}

#: Parameters of resource templates: the kind of id each names (None: not scope data, e.g. workflow names).
TEMPLATE_PARAMS = {
    "session_id": "{session}",
    "run_id": "{run}",
    "memory_id": "{memory}",
    "artifact_id": "{artifact}",
    "name": None,
}


def fresh(kind: str) -> str:
    """An id of ``kind`` that names nothing anywhere."""
    prefix = KINDS[kind]
    return new_id(prefix) if prefix else f"memory://user/notes/never-{new_id('mem')[4:]}"


def fill(value: Any, kind: str, target: str, extra: dict[str, str]) -> Any:
    if isinstance(value, str):
        if value == "{import_with_parent_session}":
            return import_line_with_parent(target, extra["import_id"])
        return target if value == kind else extra.get(value, value)
    if isinstance(value, list):
        return [fill(v, kind, target, extra) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, kind, target, extra) for k, v in value.items()}
    return value


def kind_of(arguments: dict[str, Any]) -> str:
    text = json.dumps(arguments)
    if "{import_with_parent_session}" in text:
        return "{session}"
    return next(k for k in KINDS if k in text)


#: A memory URI is a path each scope has its own of, not an id: B remembering at A's path gets B's own item.
SAME_PATH = "memory://user/notes/launch"


def leaked(world: World, text: str, allowed: str = "") -> list[str]:
    return [i for i in world.every() if i in text and i not in (allowed, SAME_PATH)]


async def tool_text(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    body = text_of(result) + json.dumps(result.structured_content or {})
    return result.is_error, body


async def walk_tools(b: Client, world: World, own_session: str) -> None:
    listed = {tool.name for tool in (await b.list_tools()).tools}
    forgotten = sorted(listed - set(BY_ID) - set(LISTING))
    assert not forgotten, f"add an isolation probe for {forgotten}"
    for tool in sorted(listed & set(BY_ID)):
        for template in BY_ID[tool]:
            kind = kind_of(template)
            for target in world.ids[kind.strip("{}")]:
                random = fresh(kind)
                extra = {"{own_session}": own_session, "import_id": new_id("ses")}
                a_error, a_text = await tool_text(b, tool, fill(template, kind, target, extra))
                r_error, r_text = await tool_text(b, tool, fill(template, kind, random, extra))
                assert a_error == r_error, (tool, a_text, r_text)  # memory_forget of nothing is {deleted: 0}
                assert a_text.replace(target, "<ID>") == r_text.replace(random, "<ID>"), (tool, a_text, r_text)
                assert leaked(world, a_text, allowed=target) == [], (tool, a_text)
    for tool in sorted(listed & set(LISTING)):
        for arguments in LISTING[tool]:
            _, text = await tool_text(b, tool, arguments)
            assert leaked(world, text) == [], (tool, text)


async def read_error(client: Client, uri: str) -> str:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    return str(caught.value)


async def walk_resources(b: Client, world: World) -> None:
    templates = [t.uri_template for t in (await b.list_resource_templates()).resource_templates]
    assert templates, "the server lists resource templates"
    for template in templates:
        params = re.findall(r"{(\w+)}", template)
        unknown = [p for p in params if p not in TEMPLATE_PARAMS]
        assert not unknown, f"say what kind of id {unknown} of {template} names in TEMPLATE_PARAMS"
        kinds = [TEMPLATE_PARAMS[p] for p in params]
        if None in kinds:
            continue  # workflow names are code every scope shares
        (kind,) = kinds
        for target in world.ids[str(kind).strip("{}")]:
            random = fresh(str(kind))
            a_text = await read_error(b, re.sub(r"{\w+}", target, template))
            r_text = await read_error(b, re.sub(r"{\w+}", random, template))
            assert a_text.replace(target, "<ID>") == r_text.replace(random, "<ID>"), (template, a_text, r_text)
    for resource in (await b.list_resources()).resources:
        body = await b.read_resource(str(resource.uri))
        text = "".join(getattr(c, "text", "") for c in body.contents)
        assert leaked(world, text) == [], (resource.uri, text)


async def walk_completions(b: Client, world: World) -> None:
    refs: list[tuple[Any, list[str]]] = []
    for t in (await b.list_resource_templates()).resource_templates:
        refs.append(
            (ResourceTemplateReference(type="ref/resource", uri=t.uri_template), re.findall(r"{(\w+)}", t.uri_template))
        )
    for p in (await b.list_prompts()).prompts:
        refs.append((PromptReference(type="ref/prompt", name=p.name), [a.name for a in p.arguments or []]))
    prefixes = ["", "ses_", "run_", "mem_", "int_", "eff_", *(i[:9] for i in world.every()), *world.every()]
    for ref, names in refs:
        for name in names:
            for prefix in prefixes:
                found = await b.complete(ref, {"name": name, "value": prefix})
                assert leaked(world, json.dumps(found.completion.values)) == [], (ref, name, prefix)


async def walk_subscriptions_legacy(a: Client, b: Client, world: World) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # resources/subscribe is the handshake-era API
        await a.subscribe_resource(f"rath://runs/{world.waiting_run}")  # A's watch is live while B tries
        for target in world.ids["run"]:
            for suffix in ("", "/events"):
                random = new_id("run")
                with pytest.raises(MCPError) as a_caught:
                    await b.subscribe_resource(f"rath://runs/{target}{suffix}")
                with pytest.raises(MCPError) as r_caught:
                    await b.subscribe_resource(f"rath://runs/{random}{suffix}")
                a_text, r_text = str(a_caught.value), str(r_caught.value)
                assert a_text.replace(target, "<ID>") == r_text.replace(random, "<ID>")


async def walk_listen_2026(a: Client, b: Client, world: World) -> None:
    """B listens to A's runs and its own; A's run changes first, B's after: B hears only its own."""
    own = await call(b, "run_start", workflow="approval", input={"draft": "B's"}, wait_s=20)
    a_uri, b_uri = f"rath://runs/{world.waiting_run}", f"rath://runs/{own['run_id']}"
    b_filter = [a_uri, f"{a_uri}/events", b_uri]
    async with (
        a.listen(resource_subscriptions=[a_uri]) as a_events,
        b.listen(resource_subscriptions=b_filter) as b_events,
    ):
        await call(a, "interrupt_resolve", interrupt_id=world.interrupt, action="approve")
        with anyio.fail_after(20):
            first = await anext(a_events)  # published on the server's bus, which B's stream shares
        assert isinstance(first, ResourceUpdated) and first.uri.startswith(a_uri)
        await call(b, "interrupt_resolve", interrupt_id=own["pending_interrupts"][0]["interrupt_id"], action="approve")
        with anyio.fail_after(20):
            heard = await anext(b_events)
        assert isinstance(heard, ResourceUpdated) and heard.uri == b_uri, heard


async def a_is_untouched(a: Client, world: World, era: str) -> None:
    """Nothing B did reached A: its run still waits (unless A answered it), its effect is still ambiguous."""
    for session in world.ids["session"]:
        await call(a, "session_get", session_id=session)
    run = await call(a, "run_get", run_id=world.waiting_run)
    assert run["status"] == ("waiting" if era == "legacy" else run["status"])
    (effect,) = (await call(a, "effect_list"))["effects"]
    assert effect["effect_id"] == world.first("effect")
    recalled = (await call(a, "memory_recall", query="launch code"))["hits"]
    assert [h["memory_id"] for h in recalled][:1] == [world.first("memory")]
    assert "B's note" not in json.dumps(recalled)
    body = await a.read_resource(f"rath://memory/{world.first('memory')}")
    assert "the launch code" in "".join(getattr(c, "text", "") for c in body.contents)


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_a_caller_of_another_scope_finds_nothing_anywhere(home: Any, era: str) -> None:
    async with (
        Runtime.open(home) as rt,
        http_serving(rt) as url,
        client_as(url, A, era) as a,
        client_as(url, B, era) as b,
    ):
        world = await populate(a, rt)
        own_session = (await call(b, "session_create", message="B's"))["session_id"]
        await walk_tools(b, world, own_session)
        await walk_resources(b, world)
        await walk_completions(b, world)
        if era == "legacy":
            await walk_subscriptions_legacy(a, b, world)
        else:
            await walk_listen_2026(a, b, world)
        await a_is_untouched(a, world, era)
