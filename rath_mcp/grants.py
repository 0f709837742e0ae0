"""Grants and scope, enforced in one place: a server middleware that every MCP request passes.

For each request it finds the caller (:func:`rath_mcp.principal.principal_of`: what HTTP
authentication left on the request, else the server's local principal), checks that the caller
holds the grant the request needs (:func:`grant_for`, from the tables below), and runs the handler
inside the caller's tenant/project (``Runtime.scope``), so every read and write the handler makes
is confined to it: an object of another scope is simply not there, and reads as "not found" in the
very words an id that never existed gets.

A request lacking its grant changes nothing: the handler never runs. A tool call gets an
``isError`` result naming the grant; any other method a JSON-RPC error (``MISSING_GRANT``) naming it.

Deny by default: a tool, prompt, resource or method the tables do not name needs ``admin``, so a
feature added without its grant is refused to ordinary tokens (and the grant-matrix test fails).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from rath_mcp.principal import Principal, principal_of
from runtime import Runtime
from runtime.errors import InvalidInputError

logger = logging.getLogger(__name__)

#: JSON-RPC error code of a request refused for a missing grant (in the implementation-defined range).
MISSING_GRANT: Final = -32003

#: The grant of every tool. Tools not named here need ``admin``.
TOOL_GRANTS: Final[Mapping[str, str]] = {
    "session_create": "session.write",
    "session_append": "session.write",
    "session_fork": "session.write",
    "session_merge": "session.write",
    "session_detach": "session.write",
    "session_import": "session.write",
    "session_get": "session.read",
    "session_list": "session.read",
    "session_lineage": "session.read",
    "session_export": "session.read",
    "workflow_list": "run.read",
    "run_get": "run.read",
    "run_wait": "run.read",
    "run_list": "run.read",
    "run_events": "run.read",
    "run_checkpoints": "run.read",
    "interrupt_list": "run.read",
    "effect_list": "run.read",
    "run_start": "run.create",
    "delegate": "run.create",
    "run_fork": "run.create",
    "run_cancel": "run.cancel",
    "interrupt_resolve": "interrupt.decide",
    "effect_resolve": "effect.resolve",
    "memory_recall": "memory.read",
    "memory_remember": "memory.write",
    "memory_commit": "memory.write",
    "memory_forget": "memory.delete",
}

#: The grant of reading (or subscribing to) a resource, by the start of its URI. Others need ``admin``.
RESOURCE_GRANTS: Final[tuple[tuple[str, str], ...]] = (
    ("rath://sessions/", "session.read"),
    ("rath://runs/", "run.read"),
    ("rath://workflows", "run.read"),
    ("rath://memory/", "memory.read"),
    ("ui://rath/", "run.read"),
)

#: The grant of each prompt (both render runs or workflows as text). Others need ``admin``.
PROMPT_GRANTS: Final[Mapping[str, str]] = {"delegate_task": "run.read", "review_run": "run.read"}

#: The grant of completing an argument, by its name (the ids it offers are of that kind).
COMPLETION_GRANTS: Final[Mapping[str, str]] = {
    "run_id": "run.read",
    "session_id": "session.read",
    "memory_id": "memory.read",
    "workflow": "run.read",
    "name": "run.read",
}

#: Methods with a fixed grant: MCP Tasks (both eras) are durable runs. ``tasks/update`` answers the
#: interrupt an ``input_required`` task waits on, so it needs what ``interrupt_resolve`` needs.
METHOD_GRANTS: Final[Mapping[str, str]] = {
    "tasks/get": "run.read",
    "tasks/result": "run.read",
    "tasks/list": "run.read",
    "tasks/cancel": "run.cancel",
    "tasks/update": "interrupt.decide",
}

#: Methods that read or change nothing of a scope: lists of what the server offers, the handshake.
FREE_METHODS: Final[frozenset[str]] = frozenset(
    {
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
        "logging/setLevel",
    }
)

#: Methods whose grant is that of the resource URI(s) they name.
_BY_URI: Final = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})


def resource_grant(uri: str) -> str:
    """The grant reading ``uri`` needs (``admin`` for a URI of no known kind)."""
    for prefix, grant in RESOURCE_GRANTS:
        if uri.startswith(prefix):
            return grant
    return "admin"


@dataclass(frozen=True)
class Need:
    """What one request needs: ``grants`` (all of them), and how to name it in a refusal."""

    grants: tuple[str, ...]
    what: str


def grant_for(method: str, params: Mapping[str, Any] | None) -> Need:
    """The grants a request needs (none for a free method)."""
    p: Mapping[str, Any] = params if isinstance(params, Mapping) else {}
    if method in FREE_METHODS or method.startswith("notifications/"):
        return Need((), method)
    if method == "tools/call":
        name = str(p.get("name", ""))
        return Need((TOOL_GRANTS.get(name, "admin"),), f"tool {name}")
    if method in _BY_URI:
        uri = str(p.get("uri", ""))
        return Need((resource_grant(uri),), f"{method} of {uri}")
    if method == "subscriptions/listen":
        notifications = p.get("notifications")
        uris = notifications.get("resourceSubscriptions") if isinstance(notifications, Mapping) else None
        named = [str(u) for u in uris] if isinstance(uris, list) else []
        return Need(tuple(dict.fromkeys(resource_grant(u) for u in named)), f"{method} of {', '.join(named)}")
    if method == "prompts/get":
        name = str(p.get("name", ""))
        return Need((PROMPT_GRANTS.get(name, "admin"),), f"prompt {name}")
    if method == "completion/complete":
        argument = p.get("argument")
        name = str(argument.get("name", "")) if isinstance(argument, Mapping) else ""
        grant = COMPLETION_GRANTS.get(name)
        return Need((grant,) if grant else (), f"completing {name}")
    return Need((METHOD_GRANTS.get(method, "admin"),), method)


def refusal(need: Need, grant: str) -> str:
    """The words of a refusal: what was asked, the grant it needs, how to get it."""
    return (
        f"{need.what} needs the grant '{grant}', which this caller does not hold; "
        f"use a token that carries {grant} (or admin)"
    )


def refused_tool_result(version: str, text: str) -> dict[str, Any]:
    """An ``isError`` tool result, in its wire envelope (a middleware that answers owns the envelope:
    2026-07-28 results carry ``resultType``)."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True}
    if version in MODERN_PROTOCOL_VERSIONS:
        result["resultType"] = "complete"
    return result


class GrantGuard:
    """The middleware: grants checked, then the handler run inside the caller's scope."""

    def __init__(self, rt: Runtime, local: Principal) -> None:
        self.rt = rt
        self.local = local

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        caller = principal_of(ctx.request, self.local)
        need = grant_for(ctx.method, ctx.params)
        missing = next((g for g in need.grants if not caller.allows(g)), None)
        if missing is not None:
            text = refusal(need, missing)
            logger.info("refused to %s in %s/%s: %s", caller.actor, caller.tenant, caller.project, text)
            if ctx.request_id is None:  # a notification: nothing to answer, nothing done
                return None
            if ctx.method == "tools/call":
                return refused_tool_result(ctx.protocol_version, text)
            raise MCPError(MISSING_GRANT, text)
        try:
            scope = self.rt.scope(caller.tenant, caller.project)
        except InvalidInputError as exc:  # a token naming an impossible scope serves nothing
            raise MCPError(MISSING_GRANT, f"this caller's scope is not valid: {exc}") from None
        with scope:
            return await call_next(ctx)


def install(server: MCPServer, rt: Runtime, local: Principal | None = None) -> None:
    """Enforce grants and scope on every request ``server`` serves (call it before other middleware).

    ``local``: the caller of requests no authentication ran for (stdio, ``--auth none``); default:
    every grant, in the scope ``rt`` was opened with.
    """
    server.middleware.append(GrantGuard(rt, local or Principal.local(rt.tenant, rt.project)))
