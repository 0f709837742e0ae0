"""The frame filter (``rath_mcp.wire``) in front of the SDK's HTTP transports: Streamable HTTP and legacy SSE.

:class:`FrameGuard` reads each POSTed message (at most the frame limit of it) and screens it. A
message that passes is handed to the SDK unchanged. Anything else is answered here:

- Streamable HTTP (``answer="http"``): in the POST's response, a JSON-RPC error body with the
  status the SDK gives the same error code (400; 413 for a body over the limit). The SDK itself
  answers unreadable bodies before checking the session, so answering them here skips nothing.
  A body over the limit is read to its end (so the connection can serve the next request) but
  only its ends are kept.
- legacy SSE (``answer="stream"``): answers travel on the connection's event stream, which only
  the SDK's transport can reach, after its checks (DNS rebinding, session, the session's owner).
  So the SDK is handed a stand-in notification in place of the bad body, and the error rides on
  the POST's scope; :class:`AnsweringStream`, the connection's read stream, finds it there and
  writes the error to the event stream instead of serving the stand-in. A client cannot set a
  scope key, so only this guard can make an answer.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import PARSE_ERROR, JSONRPCError
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rath_mcp import wire
from rath_mcp.sdk import ReadStream, WriteStream

#: The scope key that carries a refused message's answer from the guard to its connection's read stream.
ANSWER_KEY = "rath_mcp.frame_answer"
#: What the SDK's SSE transport is handed in place of a refused message (never served).
STAND_IN = b'{"jsonrpc":"2.0","method":"notifications/rath/refused_frame"}'
#: Bytes kept of each end of a body over the limit (its id sits at one end or the other).
KEPT_ENDS = 65536


class FrameGuard:
    """ASGI middleware: every POSTed JSON-RPC message screened before the SDK's transport reads it."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        limit: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
        answer: Literal["http", "stream"] = "http",
        path: str | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.answer = answer
        self.path = path  # only POSTs to this path carry MCP messages (None: every POST reaching the guard)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or not self._guards(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        chunks: list[Message] = []
        size, more = 0, True
        while more and size <= self.limit:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: let the app see it
                chunks.append(message)
                await self.app(scope, _replay(chunks, receive), send)
                return
            chunks.append(message)
            size += len(message.get("body", b""))
            more = bool(message.get("more_body", False))
        body = b"".join(m.get("body", b"") for m in chunks)
        if size > self.limit:
            verdict: Any = await _oversized(body, size, more, receive, self.limit)
        elif not body or body.isspace():
            verdict = wire.error(None, PARSE_ERROR, "Parse error: the request body is empty; POST one JSON-RPC message")
        else:
            verdict = wire.screen(body)
        if not isinstance(verdict, JSONRPCError | wire.BatchReply):
            await self.app(scope, _replay(chunks, receive), send)  # it passes: the SDK reads it as sent
        elif self.answer == "http":
            await _respond(verdict, 413 if size > self.limit else 400, scope, receive, send)
        else:
            await self.app(_standing_in(scope, verdict), _replay([_body(STAND_IN)], receive), send)

    def _guards(self, path: str) -> bool:
        return self.path is None or path.rstrip("/") == self.path.rstrip("/")


async def _oversized(start: bytes, size: int, more: bool, receive: Receive, limit: int) -> wire.Reply:
    """The answer to a body over the limit, read to its end but never held: its head and tail find its id."""
    tail = start[-KEPT_ENDS:]
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        piece = message.get("body", b"")
        size += len(piece)
        tail = (tail + piece)[-KEPT_ENDS:]
        more = bool(message.get("more_body", False))
    head, end = start[:KEPT_ENDS].decode("utf-8", "replace"), tail.decode("utf-8", "replace")
    return wire.oversized(wire.Oversized(size, head, end), limit)


async def _respond(reply: wire.Reply, status: int, scope: Scope, receive: Receive, send: Send) -> None:
    if isinstance(reply, JSONRPCError) and status != 413:
        status = ERROR_CODE_HTTP_STATUS.get(reply.error.code, status)
    body = reply.model_dump_json(by_alias=True, exclude_unset=True)
    await Response(body, status_code=status, media_type="application/json")(scope, receive, send)


def _standing_in(scope: Scope, reply: wire.Reply) -> Scope:
    """The POST's scope for the stand-in body: its own length, and the answer the connection writes."""
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(STAND_IN)).encode()))
    return {**scope, "headers": headers, ANSWER_KEY: reply}


def _body(data: bytes) -> Message:
    return {"type": "http.request", "body": data, "more_body": False}


def _replay(chunks: list[Message], receive: Receive) -> Receive:
    pending = list(chunks)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


def answer_in(item: SessionMessage | Exception) -> wire.Reply | None:
    """The answer :class:`FrameGuard` put on this message's scope (the message is its stand-in), or ``None``."""
    if not isinstance(item, SessionMessage) or not isinstance(item.metadata, ServerMessageMetadata):
        return None
    scope = getattr(item.metadata.request_context, "scope", None)
    answer = scope.get(ANSWER_KEY) if isinstance(scope, dict) else None
    return answer if isinstance(answer, JSONRPCError | wire.BatchReply) else None


class AnsweringStream:
    """The read stream of one SSE connection: stand-ins of refused messages become their answers.

    Everything else passes as the SDK's transport sent it.
    """

    def __init__(self, inner: ReadStream[SessionMessage | Exception], answers: WriteStream[SessionMessage]) -> None:
        self._inner = inner
        self._answers = answers

    @property
    def last_context(self) -> Any:
        """The sender's context, which the SDK's dispatcher reads off context-aware streams."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            answer = answer_in(item)
            if answer is None:
                return item
            await self._answers.send(SessionMessage(answer))  # type: ignore[arg-type]  # a batch answer is a list

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
