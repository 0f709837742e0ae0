"""Log messages to clients: a run's status changes, sent while a client waits on it.

Handshake-era clients opt in with ``logging/setLevel`` (the level is kept per connection and
nothing is sent before they ask); 2026-07-28 clients opt in per request through ``_meta``, which
the SDK enforces itself.
"""

from __future__ import annotations

from typing import Any, get_args

from mcp.server import MCPServer
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp_types import (
    EmptyResult,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    SetLevelRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from rath_mcp.sdk import add_request_handler, connection_of

LEVELS: tuple[str, ...] = get_args(LoggingLevel)  # severity ascending
LOGGER = "rath.runs"
_LEVEL_KEY = "rath.log_level"


def install(server: MCPServer) -> None:
    """Serve ``logging/setLevel`` (handshake era): remember the level on the connection."""

    async def set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
        connection_of(ctx.session).state[_LEVEL_KEY] = params.level
        return EmptyResult()

    add_request_handler(server, "logging/setLevel", SetLevelRequestParams, set_level)


async def log(ctx: Context, level: LoggingLevel, data: Any) -> None:
    """Send ``data`` to the calling client at ``level`` if it asked for that level."""
    session = ctx.session
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        if level not in allowed_log_levels(ctx.protocol_version, ctx.request_context.meta):
            return
    else:
        wanted = connection_of(session).state.get(_LEVEL_KEY)
        if wanted is None or LEVELS.index(level) < LEVELS.index(wanted):
            return
    # Sent as a plain notification: ``send_log_message`` is marked deprecated (logging is, as of 2026-07-28).
    params = LoggingMessageNotificationParams(level=level, data=data, logger=LOGGER)
    await session.send_notification(LoggingMessageNotification(params=params), related_request_id=ctx.request_id)


def level_of(status: str) -> LoggingLevel:
    """How loudly a run status is reported."""
    if status == "failed":
        return "error"
    if status in ("cancelled", "timed_out", "needs_review"):
        return "warning"
    return "info"
