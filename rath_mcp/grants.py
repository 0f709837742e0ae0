"""Grants and scope, enforced in one place: a server middleware that every MCP request passes.

For each request it finds the caller (:func:`rath_mcp.principal.principal_of`: what HTTP
authentication left on the request, else the server's local principal), checks that the caller
holds every grant the request needs (:func:`grant_for`, from the tables below), and runs the handler
inside the caller's tenant/project (``Runtime.scope``), so every read and write the handler makes
is confined to it: an object of another scope is simply not there, and reads as "not found" in the
very words an id that never existed gets.

A request lacking a grant changes nothing: the handler never runs. A tool call gets an
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

#: The grant a session's content needs, wherever it shows (CONTRACT §8).
SESSION_CONTENT: Final = "session.read"

# Why SESSION_CONTENT appears beside other grants below: a session's text reaches a caller through
# more than the session tools. A run started on a session answers with what the run made of it (echo
# returns it verbatim), a memory commit archives it where memory_recall finds it, a fork, merge,
# append or detach copies it into a new snapshot, a run's events stream its text (step.text), its
# pending questions and effect results are written from it, and an MCP task is a run by another name.
# So every request that names a session to act on, or whose answer is shaped from a run (summary,
# result, events, interrupts, effects, task), needs SESSION_CONTENT as well as its own grant: one
# rule, in these tables, checked before anything runs. What stays with run.read alone tells nothing
# a session holds: the workflows, a run's checkpoint list, completions of ids.
# (tests/scope/test_session_content.py finds every tool taking a session id from tools/list.)

#: The grants of every tool (all of them needed). Tools not named here need ``admin``.
TOOL_GRANTS: Final[Mapping[str, tuple[str, ...]]] = {
    "session_create": ("session.write",),
    "session_append": ("session.write", SESSION_CONTENT),
    "session_fork": ("session.write", SESSION_CONTENT),
    "session_merge": ("session.write", SESSION_CONTENT),
    "session_detach": ("session.write", SESSION_CONTENT),
    "session_import": ("session.write",),
    "session_get": (SESSION_CONTENT,),
    "session_list": (SESSION_CONTENT,),
    "session_lineage": (SESSION_CONTENT,),
    "session_export": (SESSION_CONTENT,),
    "workflow_list": ("run.read",),
    "run_get": ("run.read", SESSION_CONTENT),
    "run_wait": ("run.read", SESSION_CONTENT),
    "run_list": ("run.read", SESSION_CONTENT),
    "run_events": ("run.read", SESSION_CONTENT),
    "run_checkpoints": ("run.read",),
    "interrupt_list": ("run.read", SESSION_CONTENT),
    "effect_list": ("run.read", SESSION_CONTENT),
    "run_start": ("run.create", SESSION_CONTENT),
    "delegate": ("run.create", SESSION_CONTENT),
    "run_fork": ("run.create", SESSION_CONTENT),
    "run_cancel": ("run.cancel", SESSION_CONTENT),
    "interrupt_resolve": ("interrupt.decide", SESSION_CONTENT),
    "effect_resolve": ("effect.resolve", SESSION_CONTENT),
    "memory_recall": ("memory.read",),
    "memory_list": ("memory.read",),
    "memory_remember": ("memory.write",),
    "memory_commit": ("memory.write", SESSION_CONTENT),
    "memory_forget": ("memory.delete",),
    "artifact_save": ("artifact.write", SESSION_CONTENT),
    "artifact_list": ("artifact.read", SESSION_CONTENT),
    "artifact_get": ("artifact.read",),
    "artifact_delete": ("artifact.write",),
    "schedule_create": ("schedule.write",),
    "schedule_list": ("run.read",),
    "schedule_update": ("schedule.write",),
    "schedule_delete": ("schedule.write",),
}

#: The grants of reading (or subscribing to) a resource, by the start of its URI. Others need ``admin``.
RESOURCE_GRANTS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("rath://sessions/", (SESSION_CONTENT,)),
    ("rath://runs/", ("run.read", SESSION_CONTENT)),
    ("rath://workflows", ("run.read",)),
    ("rath://memory/", ("memory.read",)),
    ("rath://artifacts/", ("artifact.read",)),
    ("ui://rath/", ("run.read",)),
)

#: The grants of each prompt (``review_run`` renders a run's summary and events). Others need ``admin``.
PROMPT_GRANTS: Final[Mapping[str, tuple[str, ...]]] = {
    "delegate_task": ("run.read",),
    "review_run": ("run.read", SESSION_CONTENT),
}

#: The grant of completing an argument, by its name (the ids it offers are of that kind).
COMPLETION_GRANTS: Final[Mapping[str, str]] = {
    "run_id": "run.read",
    "session_id": "session.read",
    "memory_id": "memory.read",
    "artifact_id": "artifact.read",
    "workflow": "run.read",
    "name": "run.read",
}

#: Methods with fixed grants: MCP Tasks (both eras) are durable runs, and need what the run tools do.
#: ``tasks/update`` answers the interrupt an ``input_required`` task waits on, as ``interrupt_resolve``.
METHOD_GRANTS: Final[Mapping[str, tuple[str, ...]]] = {
    "tasks/get": ("run.read", SESSION_CONTENT),
    "tasks/result": ("run.read", SESSION_CONTENT),
    "tasks/list": ("run.read", SESSION_CONTENT),
    "tasks/cancel": ("run.cancel", SESSION_CONTENT),
    "tasks/update": ("interrupt.decide", SESSION_CONTENT),
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


#: What anything the tables do not name needs.
_ADMIN: Final = ("admin",)


def resource_grants(uri: str) -> tuple[str, ...]:
    """The grants reading ``uri`` needs (``admin`` for a URI of no known kind)."""
    for prefix, grants in RESOURCE_GRANTS:
        if uri.startswith(prefix):
            return grants
    return _ADMIN


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
        return Need(TOOL_GRANTS.get(name, _ADMIN), f"tool {name}")
    if method in _BY_URI:
        uri = str(p.get("uri", ""))
        return Need(resource_grants(uri), f"{method} of {uri}")
    if method == "subscriptions/listen":
        notifications = p.get("notifications")
        uris = notifications.get("resourceSubscriptions") if isinstance(notifications, Mapping) else None
        named = [str(u) for u in uris] if isinstance(uris, list) else []
        needed = tuple(dict.fromkeys(g for u in named for g in resource_grants(u)))
        return Need(needed, f"{method} of {', '.join(named)}")
    if method == "prompts/get":
        name = str(p.get("name", ""))
        return Need(PROMPT_GRANTS.get(name, _ADMIN), f"prompt {name}")
    if method == "completion/complete":
        argument = p.get("argument")
        name = str(argument.get("name", "")) if isinstance(argument, Mapping) else ""
        grant = COMPLETION_GRANTS.get(name)
        return Need((grant,) if grant else (), f"completing {name}")
    return Need(METHOD_GRANTS.get(method, _ADMIN), method)


def refusal(need: Need, grant: str) -> str:
    """The words of a refusal: what was asked, the grant it needs (and why, where it is not the
    request's own grant but the one a session's content needs), how to get it."""
    why = " (it reaches what a session holds)" if grant == SESSION_CONTENT and len(need.grants) > 1 else ""
    return (
        f"{need.what} needs the grant '{grant}'{why}, which this caller does not hold; "
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
