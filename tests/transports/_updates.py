"""Watching a run resource change, the way each protocol era does it.

Handshake era: ``resources/subscribe`` and ``notifications/resources/updated`` arriving on the
client's message handler (over stdio, the HTTP GET stream or the SSE stream). 2026-07-28: a
``subscriptions/listen`` stream of ``ResourceUpdated`` events. Either way the test gets one
``next_update()`` to await.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import ResourceUpdatedNotification

NextUpdate = Callable[[], Awaitable[None]]


class Inbox:
    """The ``resources/updated`` URIs a handshake-era client received, with a way to wait for more."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._changed = anyio.Event()

    async def handle(self, message: Any) -> None:
        """The client's ``message_handler``."""
        if isinstance(message, ResourceUpdatedNotification):
            self.seen.append(str(message.params.uri))
            self._changed.set()

    async def wait_for(self, uri: str, count: int) -> None:
        while self.seen.count(uri) < count:
            self._changed = anyio.Event()
            await self._changed.wait()


@asynccontextmanager
async def run_updates(client: Client, inbox: Inbox, uri: str) -> AsyncIterator[NextUpdate]:
    """Subscribe to ``uri`` in the client's era; yield a coroutine function awaiting its next update."""
    if client.protocol_version >= "2026-07-28":
        async with client.listen(resource_subscriptions=[uri]) as subscription:

            async def next_event() -> None:
                while True:
                    event = await anext(subscription)
                    if isinstance(event, ResourceUpdated) and event.uri == uri:
                        return

            yield next_event
        return

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # resources/subscribe is the handshake-era API
        await client.subscribe_resource(uri)
    received = inbox.seen.count(uri)

    async def next_notification() -> None:
        nonlocal received
        received += 1
        await inbox.wait_for(uri, received)

    yield next_notification
