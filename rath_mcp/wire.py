"""Every JSON-RPC request gets an answer, even one the MCP SDK's parser refuses.

The SDK parses messages with pydantic's JSON parser, which refuses a string holding a lone UTF-16
surrogate escape (``"\\ud800"``) and anything nested deeper than 200 levels. On stdio and SSE it
then drops the message (the dispatcher only logs it), so the client waits for ever; Streamable
HTTP answers a parse error without the request's id. Python's own ``json`` reads both, so:

- a message the SDK refused is read again with ``json`` and served as usual, where
  :func:`guard_requests` (server middleware, so every transport and era passes it) answers what is
  wrong with it: Invalid params naming where, for lone surrogates, NaN/Infinity and deep nesting;
- a message even ``json`` cannot read gets a parse error that still carries the request's id when
  its top level can be scanned for one (a client matches answers by id).

:class:`AnsweringReadStream` does this for stdio and SSE (which hand the refused text to the
server as an exception); :class:`ParseGuard` does it in front of the Streamable HTTP app.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rath_mcp.sdk import ReadStream, WriteStream
from runtime.jsonvalue import problem, shorten

logger = logging.getLogger(__name__)

#: Deepest nesting of a request's params (arguments sit two levels in; stored values allow 64 more).
MAX_PARAMS_DEPTH = 100


def params_problem(method: str, params: Any) -> str | None:
    """What makes these params impossible to serve, in words, or ``None``."""
    found = problem(params, max_depth=MAX_PARAMS_DEPTH)
    if found is None:
        return None
    path, why = found
    return f"invalid params for {method}: params{shorten(path)} {why}. Fix the request and send it again."


async def guard_requests(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: refuse params JSON cannot carry (Invalid params) before any handler sees them."""
    text = params_problem(ctx.method, ctx.params) if ctx.params else None
    if text is None:
        return await call_next(ctx)
    if ctx.request_id is None:  # a notification has no one to answer
        logger.warning("dropped a %s notification: %s", ctx.method, text)
        return None
    raise MCPError(INVALID_PARAMS, text)


def reread(raw: str | bytes) -> SessionMessage | JSONRPCError | None:
    """A message the SDK's parser refused: read again (to be served), or the error that answers it.

    ``None`` when it cannot be answered (a notification or response that is not JSON at all).
    """
    try:
        decoded = json.loads(raw)
    except RecursionError:
        too_deep = f"invalid params: the message is nested deeper than {MAX_PARAMS_DEPTH} levels of objects and arrays"
        return _error_for(raw, INVALID_PARAMS, too_deep + "; flatten it and send it again")
    except ValueError as exc:  # not JSON at all (a bad byte, a cut line, an integer of 4300+ digits)
        return _error_for(raw, PARSE_ERROR, f"Parse error: the message is not valid JSON ({exc})")
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(decoded, by_name=False))
    except ValidationError:
        request_id = decoded.get("id") if isinstance(decoded, dict) else None
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            return None
        return JSONRPCError(
            jsonrpc="2.0",
            id=request_id,
            error=ErrorData(code=types.INVALID_REQUEST, message="Invalid request: not a JSON-RPC 2.0 message"),
        )


def refused_text(exc: Exception) -> str | bytes | None:
    """The raw text of a message the SDK's parser refused (its ``json_invalid`` error carries it)."""
    if not isinstance(exc, ValidationError):
        return None
    for error in exc.errors():
        if error.get("type") == "json_invalid" and isinstance(error.get("input"), str | bytes):
            raw: str | bytes = error["input"]
            return raw
    return None


def _error_for(raw: str | bytes, code: int, what: str) -> JSONRPCError | None:
    request_id = top_level_id(raw)
    if request_id is None and code != PARSE_ERROR:
        return None
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=what))


def top_level_id(raw: str | bytes) -> str | int | None:
    """The ``id`` member of a JSON object, found without parsing what it nests (which may be too deep)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    depth, i, n = 0, 0, len(text)
    key: str | None = None
    while i < n:
        ch = text[i]
        if ch == '"':
            end = _string_end(text, i)
            if depth == 1 and key is None:
                candidate = text[i + 1 : end - 1]
                after = text[end:].lstrip()
                if after.startswith(":"):
                    key = candidate
                    i = n - len(after) + 1
                    if key == "id":
                        return _scalar_id(text[i:])
                    continue
            i = end
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == "," and depth == 1:
            key = None
        i += 1
    return None


def _string_end(text: str, start: int) -> int:
    """Index just past the closing quote of the string starting at ``start``."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    return len(text)


def _scalar_id(rest: str) -> str | int | None:
    rest = rest.lstrip()
    try:
        value, _ = json.JSONDecoder().raw_decode(rest)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return value


class AnsweringReadStream:
    """The server's read stream of one stdio or SSE connection, with refused messages read again.

    The SDK transport puts the parse failure on the stream in place of the message; this serves the
    re-read message instead, or writes its error answer to the connection itself.
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
            raw = refused_text(item) if isinstance(item, Exception) else None
            if raw is None:
                return item
            outcome = reread(raw)
            if isinstance(outcome, SessionMessage):
                return outcome
            if outcome is not None:
                await self._answers.send(SessionMessage(outcome))
            else:
                logger.warning("dropped a message that is not JSON-RPC and carries no id to answer")

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class ParseGuard:
    """ASGI middleware before the Streamable HTTP app: answers a POST body the SDK's parser would refuse.

    The SDK would answer a parse error without the request's id; here the body is read again and
    answered as :func:`guard_requests` answers it (or with a parse error carrying the id).
    Bodies that parse, or larger than ``max_body``, pass through untouched.
    """

    def __init__(self, app: ASGIApp, *, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[Message] = []
        size, more = 0, True
        while more and size <= self.max_body:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            more = bool(message.get("more_body", False))
        if not more and size <= self.max_body:
            body = b"".join(m.get("body", b"") for m in chunks if m["type"] == "http.request")
            answer = _answer_for_body(body)
            if answer is not None:
                status = 400 if answer.id is None else 200
                body_json = answer.model_dump(mode="json", by_alias=True, exclude_unset=True)
                await JSONResponse(body_json, status_code=status)(scope, receive, send)
                return
        await self.app(scope, _replay(chunks, receive), send)


def _answer_for_body(body: bytes) -> JSONRPCError | None:
    """The answer to a body the SDK's parser refuses, or ``None`` to let the SDK serve it."""
    try:
        pydantic_core.from_json(body)
        return None
    except ValueError:
        pass
    outcome = reread(body)
    if isinstance(outcome, SessionMessage):
        message = outcome.message
        if not isinstance(message, types.JSONRPCRequest):
            return None
        text = params_problem(message.method, message.params)
        if text is None:
            return None
        return JSONRPCError(jsonrpc="2.0", id=message.id, error=ErrorData(code=INVALID_PARAMS, message=text))
    return outcome


def _replay(chunks: list[Message], receive: Receive) -> Receive:
    pending = list(chunks)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed
