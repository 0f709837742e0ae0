"""The ``sampling`` provider's bridge: a workflow's model call answered by the connected client's model.

A model call belongs to a run (``runtime.durable.current_run_id``) and goes only to a client that
asked for that run, so one client's model never sees another client's conversation:

1. a handshake-era client waiting on the run (``run_start``/``run_wait``/``delegate``) gets it as
   ``sampling/createMessage`` on the channel of that waiting tool call (works on every transport);
2. a 2026-07-28 client waiting on the run gets it inside its ``InputRequiredResult``
   (``SamplingQueue``);
3. when nobody waits on the run and exactly one client that samples is around (stdio: the host),
   that client answers; with several, the call fails saying which run to wait on.

A middleware notes every handshake-era client that declared the ``sampling`` capability, and the
tool calls they have in flight (for case 3).

Requests and answers take their wire shape in ``runtime.providers.sampling`` (``sampling_params``,
``response_from_sampling``); tools are offered only to clients that declared ``sampling.tools``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResultWithTools,
    RequestId,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from rath_mcp.sampling_queue import SamplingQueue
from rath_mcp.sdk import connection_of
from runtime import Runtime
from runtime.durable import current_run_id
from runtime.providers import ModelRequest, ModelResponse, NoSamplingClient, ProviderError, SamplingProvider
from runtime.providers.sampling import response_from_sampling, sampling_params
from runtime.telemetry import Tracing

MAX_REMEMBERED = 16


@dataclass
class _Client:
    session: ServerSession
    tools: bool
    in_flight: list[tuple[RequestId, ServerSession]]  # tool calls still running, with their channels


@dataclass(frozen=True)
class _Watcher:
    session: ServerSession
    request_id: RequestId | None  # the waiting tool call, whose channel carries the request
    tools: bool


class ClientSampling:
    """Routes ``ModelRequest``s to a connected client's ``sampling/createMessage``."""

    def __init__(self, queue: SamplingQueue | None = None, *, tracing: Tracing | None = None) -> None:
        """``tracing``: each request carries the model call's span in ``_meta`` (SEP-414) when it is on."""
        self.tracing = tracing or Tracing()
        self._clients: dict[int, _Client] = {}  # by connection, oldest first
        self._watchers: dict[str, list[_Watcher]] = {}  # run id -> handshake-era clients waiting on it
        self.queue = queue or SamplingQueue()
        self._modern_seen_at = float("-inf")  # when a 2026-07-28 client that samples last called

    # -- bookkeeping (from the middleware) -------------------------------------------------
    async def observe(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        caps = ctx.session.client_capabilities
        if caps is None or caps.sampling is None:
            return await call_next(ctx)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            self._modern_seen_at = anyio.current_time()
            return await call_next(ctx)
        connection = connection_of(ctx.session)
        key = id(connection)
        client = self._clients.pop(key, None)
        if client is None:
            client = _Client(ctx.session, caps.sampling.tools is not None, [])
            connection.exit_stack.callback(self._clients.pop, key, None)  # forget it when it closes
        client.session = ctx.session
        self._clients[key] = client  # re-inserted: newest last
        while len(self._clients) > MAX_REMEMBERED:
            del self._clients[next(iter(self._clients))]
        if ctx.method != "tools/call" or ctx.request_id is None:
            return await call_next(ctx)
        entry = (ctx.request_id, ctx.session)
        client.in_flight.append(entry)
        try:
            return await call_next(ctx)
        finally:
            client.in_flight.remove(entry)

    def _modern_client_around(self) -> bool:
        """A sampling 2026-07-28 client waits on a run now, or called recently enough to come back."""
        recent = anyio.current_time() - self._modern_seen_at < self.queue.answer_wait_s
        return self.queue.has_waiters or recent

    @contextmanager
    def watching(
        self, session: ServerSession, request_id: RequestId | None, run_id: str, *, tools: bool
    ) -> Iterator[None]:
        """While a handshake-era client waits on ``run_id``, that run's model calls go to it."""
        watcher = _Watcher(session, request_id, tools)
        self._watchers.setdefault(run_id, []).append(watcher)
        try:
            yield
        finally:
            watchers = self._watchers[run_id]
            watchers.remove(watcher)
            if not watchers:
                del self._watchers[run_id]

    # -- the provider callback -------------------------------------------------------------
    async def __call__(self, request: ModelRequest) -> ModelResponse:
        run_id = current_run_id()
        watchers = self._watchers.get(run_id or "")
        if watchers:
            watcher = watchers[-1]
            return await self._send(watcher.session, watcher.request_id, watcher.tools, request)
        if self.queue.waits_on(run_id):
            return from_result(await self.queue.ask(request, run_id), request)
        modern = self._modern_client_around()
        candidates = len(self._clients) + (1 if modern else 0)
        if candidates == 0:
            raise NoSamplingClient(
                "no connected MCP client offers sampling; connect a client that declares the sampling "
                "capability, or configure openai, anthropic or scripted"
            )
        if candidates > 1:
            raise ProviderError(
                f"{candidates} connected MCP clients offer sampling and none is waiting on run {run_id}; "
                "call run_wait on it from the client whose model should answer (a run's model calls go "
                "only to a client that waits on that run)",
                provider="sampling",
            )
        if modern:
            return from_result(await self.queue.ask(request, run_id), request)
        client = next(iter(self._clients.values()))
        related, session = client.in_flight[-1] if client.in_flight else (None, client.session)
        return await self._send(session, related, client.tools, request)

    async def _send(
        self, session: ServerSession, related: RequestId | None, tools: bool, request: ModelRequest
    ) -> ModelResponse:
        """Ask over ``session``; on the channel of tool call ``related`` when given (every transport has it)."""
        metadata = ServerMessageMetadata(related_request_id=related) if related is not None else None
        params = to_params(request, with_tools=tools)
        if carrier := self.tracing.headers():  # a client that traces too puts its model's work in our trace
            params = params.model_copy(update={"meta": {**(params.meta or {}), **carrier}})
        result = await session.send_request(
            CreateMessageRequest(params=params),
            CreateMessageResultWithTools,
            metadata=metadata,
        )
        return from_result(result, request)


def to_params(request: ModelRequest, *, with_tools: bool) -> CreateMessageRequestParams:
    """A ``ModelRequest`` as ``sampling/createMessage`` parameters (the runtime's shape, validated by the SDK)."""
    return CreateMessageRequestParams.model_validate(sampling_params(request, with_tools=with_tools))


def from_result(result: CreateMessageResultWithTools, request: ModelRequest) -> ModelResponse:
    """The client's answer as a ``ModelResponse`` (usage estimated: sampling reports none)."""
    return response_from_sampling(result.model_dump(by_alias=True, mode="json"), request)


def install(server: MCPServer, rt: Runtime) -> ClientSampling:
    """Make ``sampling`` a provider of ``rt`` answered by this server's clients."""
    sampling = ClientSampling(tracing=rt.providers.tracing)
    server.middleware.append(sampling.observe)
    rt.providers.register("sampling", SamplingProvider(sampling))
    return sampling
