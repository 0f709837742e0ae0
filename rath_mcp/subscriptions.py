"""Resource subscriptions on runs: ``resources/updated`` for ``rath://runs/{id}`` on every status change.

Both protocol eras are served from one watcher per subscribed run:

- handshake era: ``resources/subscribe``/``unsubscribe`` requests record the connection; updates go
  out on its standalone channel (``ServerSession.send_resource_updated``).
- 2026-07-28: ``subscriptions/listen`` streams name the URIs they want; a middleware sees the
  stream open and close (it wraps the whole stream), and updates are published on the server's
  ``SubscriptionBus``, which fans them out to the matching streams.

Watchers live in the runtime's task group and end when their run is terminal or nobody listens.
``rath://runs/{id}/events`` may be subscribed too: it is updated on every new event.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ResourceUpdated, SubscriptionBus
from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from rath_mcp.errors import protocol_errors
from rath_mcp.sdk import add_request_handler, connection_of
from runtime import NotFoundError, Runtime
from runtime.durable.models import Run

logger = logging.getLogger(__name__)

RUN_URI = re.compile(r"^rath://runs/(run_[A-Za-z0-9]+)(/events)?$")


def run_of(uri: str) -> str | None:
    """The run id a subscribable URI is about (None for URIs that are not run resources)."""
    match = RUN_URI.match(uri)
    return match.group(1) if match else None


@dataclass
class _Watch:
    """Who listens to one run, and the scope that stops its watcher."""

    sessions: dict[int, tuple[ServerSession, set[str]]] = field(default_factory=dict)
    streams: dict[str, int] = field(default_factory=dict)  # uri -> open listen streams naming it
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def idle(self) -> bool:
        return not self.sessions and not any(self.streams.values())


class RunSubscriptions:
    """Per-server registry of run subscriptions and their watchers."""

    def __init__(self, rt: Runtime, bus: SubscriptionBus) -> None:
        self.rt = rt
        self.bus = bus
        self._watches: dict[str, _Watch] = {}

    # -- registration (called by the protocol handlers) --------------------------------------
    async def _watch(self, run_id: str) -> _Watch:
        # Checked on every subscription, watched already or not: the run must be in the caller's scope
        # (a run of another scope fails here exactly as an unknown id does, with the runtime's message).
        await self.rt.runs.get(run_id)
        watch = self._watches.get(run_id)  # looked up again: a concurrent subscribe may have made it meanwhile
        if watch is None:
            watch = self._watches[run_id] = _Watch()
            self.rt.task_group.start_soon(self._run_watcher, run_id, watch)
        return watch

    async def subscribe_session(self, session: ServerSession, uri: str) -> None:
        run_id = run_of(uri)
        if run_id is None:
            return  # other resources never change under a subscriber; accepting is harmless
        watch = await self._watch(run_id)
        connection = connection_of(session)  # subscriptions belong to the connection, not the request
        if id(connection) not in watch.sessions:
            connection.exit_stack.callback(self._drop_connection, run_id, id(connection))
        _, uris = watch.sessions.setdefault(id(connection), (session, set()))
        uris.add(uri)

    def _drop_connection(self, run_id: str, key: int) -> None:
        """A subscribed connection closed: its subscriptions end with it."""
        watch = self._watches.get(run_id)
        if watch is not None and watch.sessions.pop(key, None) is not None:
            self._stop_if_idle(run_id, watch)

    def unsubscribe_session(self, session: ServerSession, uri: str) -> None:
        run_id = run_of(uri)
        watch = self._watches.get(run_id) if run_id else None
        if watch is None:
            return
        key = id(connection_of(session))
        entry = watch.sessions.get(key)
        if entry is not None:
            entry[1].discard(uri)
            if not entry[1]:
                del watch.sessions[key]
        self._stop_if_idle(run_id, watch)

    async def open_stream(self, uris: list[str]) -> list[tuple[str, str]]:
        """A listen stream naming ``uris`` opened; returns the (run_id, uri) pairs now watched."""
        opened = []
        for uri in uris:
            run_id = run_of(uri)
            if run_id is None:
                continue
            try:
                watch = await self._watch(run_id)
            except NotFoundError:
                continue  # a listen filter naming an unknown run (or one of another scope) never fires
            watch.streams[uri] = watch.streams.get(uri, 0) + 1
            opened.append((run_id, uri))
        return opened

    def close_stream(self, opened: list[tuple[str, str]]) -> None:
        for run_id, uri in opened:
            watch = self._watches.get(run_id)
            if watch is not None:
                watch.streams[uri] = max(0, watch.streams.get(uri, 0) - 1)
                self._stop_if_idle(run_id, watch)

    def _stop_if_idle(self, run_id: str | None, watch: _Watch) -> None:
        if run_id is not None and watch.idle():
            watch.scope.cancel()
            self._watches.pop(run_id, None)

    # -- the watcher -------------------------------------------------------------------------
    async def _run_watcher(self, run_id: str, watch: _Watch) -> None:
        """Publish the run's changes; it runs in the runtime's task group, so it must never raise."""
        with watch.scope:
            last: Run | None = None
            try:
                async for run in self.rt.runs.watch(run_id):
                    if last is not None:  # the first is the state at subscription time: nothing changed yet
                        await self._publish(run, watch, status_changed=run.status != last.status)
                    last = run
            except Exception:  # a store error here would otherwise stop every run and the server
                logger.exception("watching run %s for its subscribers failed; they get no more updates", run_id)
            finally:
                if self._watches.get(run_id) is watch:
                    del self._watches[run_id]

    async def _publish(self, run: Run, watch: _Watch, *, status_changed: bool) -> None:
        run_uri, events_uri = f"rath://runs/{run.id}", f"rath://runs/{run.id}/events"
        changed = [events_uri] + ([run_uri] if status_changed else [])
        for uri in changed:
            await self.bus.publish(ResourceUpdated(uri=uri))
        for session, uris in list(watch.sessions.values()):
            for uri in changed:
                if uri in uris:
                    await session.send_resource_updated(uri)


def _listening_only_to(
    ctx: ServerRequestContext[Any, Any], notifications: Any, uris: list[Any], opened: list[tuple[str, str]]
) -> ServerRequestContext[Any, Any]:
    """The listen request with the run URIs it may not watch left out of its filter.

    The subscription bus fans updates out by URI alone; a stream naming a run of another scope (or
    one that does not exist: the same thing to this caller) must never match its updates.
    """
    watched = {uri for _, uri in opened}
    kept = [u for u in uris if not isinstance(u, str) or run_of(u) is None or u in watched]
    if len(kept) == len(uris):
        return ctx
    params = {**(ctx.params or {}), "notifications": {**notifications, "resourceSubscriptions": kept}}
    return replace(ctx, params=params)


def install(server: MCPServer, subscriptions: RunSubscriptions) -> None:
    """Serve ``resources/subscribe``/``unsubscribe`` and observe ``subscriptions/listen`` streams."""

    async def on_subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        with protocol_errors():
            await subscriptions.subscribe_session(ctx.session, str(params.uri))
        return EmptyResult()

    async def on_unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        subscriptions.unsubscribe_session(ctx.session, str(params.uri))
        return EmptyResult()

    async def observe_listen(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "subscriptions/listen" or ctx.request_id is None:
            return await call_next(ctx)
        notifications: Any = (ctx.params or {}).get("notifications") or {}
        uris = notifications.get("resourceSubscriptions") or [] if isinstance(notifications, dict) else []
        opened = await subscriptions.open_stream([u for u in uris if isinstance(u, str)])
        try:
            return await call_next(_listening_only_to(ctx, notifications, uris, opened))
        finally:
            subscriptions.close_stream(opened)

    add_request_handler(server, "resources/subscribe", SubscribeRequestParams, on_subscribe)
    add_request_handler(server, "resources/unsubscribe", UnsubscribeRequestParams, on_unsubscribe)
    server.middleware.append(observe_listen)
