"""The audit trail and tool metrics, as one SDK server middleware (every transport and era passes it).

It sits outermost in ``server.middleware`` (only the request's trace span, ``rath_mcp.tracing``, wraps
it), so it sees what every other middleware decided, grant
refusals included: a call whose result is an ``isError`` naming a missing grant (or an error naming
one) is recorded as ``refused``. Every call that can change state (a tool not in ``READ_TOOLS``,
``tasks/cancel``, ``tasks/update``) is recorded with its outcome. A record holds ids only: the
target ids found in the arguments and the result, never an argument's value (which may be a
secret). Calls of the trusted local principal (stdio, ``--auth none``) are not recorded: the
trail is of remote callers. The HTTP gate records its own refusals (401/403) through ``Auditor``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from rath_mcp.ops import ServerMetrics
from rath_mcp.principal import GRANTS, Principal, principal_of
from runtime.access.store import AuditRecord, AuditStore
from runtime.ids import now

logger = logging.getLogger(__name__)

READ_TOOLS = frozenset(
    {
        "session_get",
        "session_list",
        "session_lineage",
        "session_export",
        "workflow_list",
        "run_get",
        "run_wait",
        "run_list",
        "run_events",
        "run_checkpoints",
        "interrupt_list",
        "effect_list",
        "memory_recall",
        "memory_list",
    }
)
WRITE_METHODS = frozenset({"tasks/cancel", "tasks/update"})
_ID = re.compile(r"^[a-z]{3}_[0-9a-f]{24}$")
_GRANT_WORD = re.compile(r"\b(" + "|".join(re.escape(g) for g in GRANTS) + r")\b")


class Auditor:
    """Writes audit records; a failing write is logged, never the caller's failure."""

    def __init__(self, store: AuditStore, *, clock: Callable[[], float] = now) -> None:
        self.store = store
        self.clock = clock

    async def record(
        self,
        actor: str,
        action: str,
        outcome: str,
        *,
        principal: Principal | None = None,
        targets: Iterable[str] = (),
        reason: str | None = None,
        method: str | None = None,
    ) -> None:
        entry = AuditRecord(
            at=self.clock(),
            actor=actor,
            tenant=principal.tenant if principal else None,
            project=principal.project if principal else None,
            action=action,
            outcome=outcome,
            targets=tuple(dict.fromkeys(targets)),
            reason=reason,
            method=method or (principal.method if principal else None),
        )
        try:
            await self.store.append([entry])
        except Exception as exc:
            logger.warning("could not write an audit record for %s (%s): %s", action, outcome, exc)


def ids_in(value: Any) -> list[str]:
    """Ids (``xxx_<24 hex>``) held by the ``…_id``/``…_ids``/``taskId`` members of a mapping: nothing else."""
    found: list[str] = []
    if not isinstance(value, Mapping):
        return found
    for key, item in value.items():
        if not isinstance(key, str) or not (key.endswith(("_id", "_ids")) or key == "taskId"):
            continue
        for candidate in item if isinstance(item, list) else [item]:
            if isinstance(candidate, str) and _ID.match(candidate):
                found.append(candidate)
    return found


def missing_grant(text: str) -> str | None:
    """The grant an error's text says is missing, if it speaks of one."""
    if "grant" not in text.lower():
        return None
    found = _GRANT_WORD.search(text)
    return found.group(1) if found else None


def _result_text(result: HandlerResult) -> tuple[bool, str, Any]:
    """(is an error, its text, structured content) of a tools/call result, dict or model."""
    data = result.model_dump(by_alias=True) if isinstance(result, BaseModel) else result
    if not isinstance(data, Mapping):
        return False, "", None
    texts = [c.get("text", "") for c in data.get("content") or [] if isinstance(c, Mapping)]
    return bool(data.get("isError")), " ".join(t for t in texts if isinstance(t, str)), data.get("structuredContent")


def _action(ctx: ServerRequestContext[Any, Any]) -> tuple[str, bool]:
    """(what is audited as the action, whether it changes state)."""
    params = ctx.params or {}
    if ctx.method == "tools/call":
        name = str(params.get("name", "?"))
        return name, name not in READ_TOOLS
    return ctx.method, ctx.method in WRITE_METHODS


def install(server: MCPServer, auditor: Auditor, metrics: ServerMetrics, default: Principal) -> None:
    """Put the audit/metrics middleware outermost (before every other middleware of the server)."""

    async def audited(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        action, writes = _action(ctx)
        principal = principal_of(ctx.request, default)
        started = time.perf_counter()
        params = ctx.params or {}
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            await _after(auditor, metrics, ctx, principal, action, writes, started, (params, None), str(exc), None)
            raise
        is_error, text, structured = _result_text(result) if ctx.method == "tools/call" else (False, "", None)
        await _after(
            auditor, metrics, ctx, principal, action, writes, started, (params, structured),
            text if is_error else None, result,
        )  # fmt: skip
        return result

    server.middleware.insert(0, audited)


async def _after(
    auditor: Auditor,
    metrics: ServerMetrics,
    ctx: ServerRequestContext[Any, Any],
    principal: Principal,
    action: str,
    writes: bool,
    started: float,
    holders: tuple[Mapping[str, Any], Any],
    error: str | None,
    result: HandlerResult,
) -> None:
    """Count the call; record it when it is audited. ``holders``: the request's params and the result's
    structured content, where its target ids are found (looked for only when a record is written)."""
    grant = missing_grant(error) if error is not None else None
    outcome = "refused" if grant else "error" if error is not None else "ok"
    if ctx.method == "tools/call":
        metrics.tool_called(action, outcome, time.perf_counter() - started)
    if grant:
        metrics.refused("missing_grant")
    if principal.method == "local" or not (grant or writes):
        return
    params, structured = holders
    targets = ids_in(params) + ids_in(params.get("arguments")) + ids_in(structured)
    reason = f"missing grant {grant}" if grant else None
    await auditor.record(principal.actor, action, outcome, principal=principal, targets=targets, reason=reason)
