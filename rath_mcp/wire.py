"""The frame filter: every raw JSON-RPC frame is judged here before the MCP SDK sees it.

A frame either passes, parsed (:func:`screen` returns the message, which every transport hands
the SDK as the SDK itself would have), or gets its JSON-RPC error answer here, at the edge. The SDK
alone leaves many bad frames unanswered or worse: it drops a batch, a wrong ``jsonrpc``, a
``params`` array and a response without an id; it takes a request whose ``id`` is null, a float, a
boolean, an object or an array for a notification (and drops it); and it refuses a lone UTF-16
surrogate escape (``"\\ud800"``) or nesting past 200 levels, which, read again by a more lenient
parser, let text that is not Unicode reach a reply that then could not be written (the stdio
server exited, an SSE session ended). So nothing is read again: a frame passes only if pydantic
(the SDK's parser) reads it and its envelope is JSON-RPC 2.0 as MCP uses it; everything else is
answered with the request's id when one can be read, else ``id: null``:

- not JSON: Parse error (-32700); nested too deep for any parser: Invalid params (-32602);
- a batch: an array of Invalid Request errors, one per request in it (MCP has no batches);
- a wrong envelope (``jsonrpc``, ``id``, ``method``, ``params`` of the wrong type, a response
  without an id, a lone surrogate outside ``params``): Invalid Request (-32600);
- ``params`` that are an array, or hold what JSON cannot carry: Invalid params (-32602);
- a frame over the size limit (:func:`oversized`, found by the transport without reading it
  whole): Invalid Request.

:func:`guard_requests` (server middleware) refuses NaN, Infinity and deep nesting in the params of
requests that pass, on every transport including the in-memory one. The transports apply the
filter: ``rath_mcp.stdio_pipes`` (stdio) and ``rath_mcp.http_frames`` (Streamable HTTP, SSE).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import pydantic_core
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import RootModel, ValidationError

from runtime.jsonvalue import problem, shorten

logger = logging.getLogger(__name__)

#: Deepest nesting of a request's params (arguments sit two levels in; stored values allow 64 more).
MAX_PARAMS_DEPTH = 100
#: The largest frame served, in bytes (``rath-mcp serve --max-frame-bytes``): the SDK's HTTP body limit.
MAX_FRAME_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE
#: How much of a frame's start is searched for its id when the frame cannot be parsed (bounded work).
ID_SCAN_CHARS = 65536


class BatchReply(RootModel[list[JSONRPCError]]):
    """The answer to a batch: one error per request in it, as a JSON array (JSON-RPC 2.0 §6)."""


#: What answers a refused frame; transports write it as they write any message (``model_dump_json``).
Reply = JSONRPCError | BatchReply


@dataclass(frozen=True)
class Oversized:
    """A frame over the limit, as a transport saw it: its size, and its start and end (where ids sit)."""

    size: int
    head: str
    tail: str


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


def screen(raw: str | bytes) -> types.JSONRPCMessage | Reply | None:
    """The message in one frame, to serve, or the error that answers it; ``None`` for a blank line."""
    if not raw or raw.isspace():
        return None
    try:
        decoded = pydantic_core.from_json(raw)
    except ValueError as exc:  # the SDK's parser cannot read it: answered here, never served
        return _unreadable(raw, exc)
    refusal = envelope_problem(decoded)
    if refusal is not None:
        return refusal
    try:
        message: types.JSONRPCMessage = types.jsonrpc_message_adapter.validate_python(decoded, by_name=False)
    except ValidationError as exc:  # e.g. an error's code that is not an integer: said as the frame's kind has it
        kind = _kind_of_message(decoded)
        first = next((e for e in exc.errors() if e["loc"][:1] == (kind,)), exc.errors()[0])
        where = shorten(".".join(str(step) for step in first["loc"][1:])) or "the message"
        what = f"Invalid request: {where}: {first['msg']}. Send a JSON-RPC 2.0 message as MCP defines it"
        return error(decoded.get("id") if "method" in decoded else None, INVALID_REQUEST, what)
    return message


def _kind_of_message(decoded: dict[str, Any]) -> str:
    """Which message model a frame with a sound envelope is meant to be."""
    if "method" in decoded:
        return "JSONRPCRequest" if "id" in decoded else "JSONRPCNotification"
    return "JSONRPCError" if "error" in decoded else "JSONRPCResponse"


def oversized(frame: Oversized, limit: int) -> JSONRPCError:
    """The answer to a frame over ``limit`` bytes (the transport read only its head and tail)."""
    what = (
        f"Invalid request: the message is {frame.size} bytes, over this server's limit of {limit} "
        "(rath-mcp serve --max-frame-bytes); send less in one message"
    )
    found = _id_in_head(frame.head)
    return error(found if found is not None else _id_at_end(frame.tail), INVALID_REQUEST, what)


def encode(message: types.JSONRPCMessage | Reply) -> bytes:
    """A message as one line of UTF-8 JSON; a reply that cannot be written becomes an Internal error."""
    try:
        return (message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()
    except (pydantic_core.PydanticSerializationError, UnicodeError) as exc:
        logger.error("a message could not be written as JSON (%s); it is answered with an Internal error", exc)
        request_id = getattr(message, "id", None)
        if not isinstance(message, types.JSONRPCResponse | JSONRPCError) or not _usable_id(request_id):
            return b""  # a notification or request of ours: no one waits on it by id
        what = "Internal error: the reply held text that is not Unicode and could not be written; please report it"
        return encode(error(request_id, INTERNAL_ERROR, what))


def error(request_id: Any, code: int, message: str) -> JSONRPCError:
    """A JSON-RPC error answer; ``request_id`` is kept only when it can be written back (else null)."""
    clean = message.encode("utf-8", "backslashreplace").decode("utf-8")  # never a lone surrogate in a reply
    kept = request_id if _usable_id(request_id) else None
    return JSONRPCError(jsonrpc="2.0", id=kept, error=ErrorData(code=code, message=clean))


def envelope_problem(decoded: Any) -> Reply | None:
    """What is wrong with a parsed frame as a JSON-RPC 2.0 message of MCP (an error answer), or ``None``."""
    if isinstance(decoded, list):
        return _batch(decoded)
    if not isinstance(decoded, dict):
        return error(None, INVALID_REQUEST, f"Invalid request: a message is a JSON object, not {_kind(decoded)}")
    request_id = decoded.get("id")
    if decoded.get("jsonrpc") != "2.0":
        got = _shown(decoded["jsonrpc"]) if "jsonrpc" in decoded else "nothing"
        return error(request_id, INVALID_REQUEST, f'Invalid request: "jsonrpc" must be "2.0", got {got}')
    if "method" in decoded:
        if "id" in decoded and not _usable_id(request_id):
            what = f'Invalid request: "id" must be a string or an integer, got {_kind(request_id)}'
            return error(None, INVALID_REQUEST, what)
        method, params = decoded["method"], decoded.get("params")
        if not isinstance(method, str) or not _is_text(method):
            return error(
                request_id, INVALID_REQUEST, f'Invalid request: "method" must be a string of text, got {_kind(method)}'
            )
        if params is not None and not isinstance(params, dict):
            code = INVALID_PARAMS if isinstance(params, list) else INVALID_REQUEST
            named = '"params" must be an object (MCP names every parameter)'
            what = f"invalid params for {method}: {named}, got {_kind(params)}"
            return error(request_id, code, what)
        return None
    if "result" in decoded or "error" in decoded:  # a response to a request of ours
        if "result" in decoded and "error" in decoded:
            return error(None, INVALID_REQUEST, 'Invalid request: a response has a "result" or an "error", not both')
        if not _usable_id(request_id) and not ("error" in decoded and request_id is None and "id" in decoded):
            return error(None, INVALID_REQUEST, 'Invalid request: a response needs the "id" of the request it answers')
        return None
    what = (
        'Invalid request: a message needs a "method" (a request or notification) or a "result" or "error" (a response)'
    )
    return error(request_id, INVALID_REQUEST, what)


def _unreadable(raw: str | bytes, exc: ValueError) -> Reply:
    """The answer to a frame pydantic cannot read: why, found with Python's more lenient ``json``."""
    try:
        decoded = json.loads(raw)
    except RecursionError:
        too_deep = f"invalid params: the message is nested deeper than {MAX_PARAMS_DEPTH} levels of objects and arrays"
        return error(request_id_in(raw), INVALID_PARAMS, too_deep + "; flatten it and send it again")
    except ValueError as bad:  # not JSON at all (a bad byte, a cut line, an integer of 4300+ digits)
        return error(request_id_in(raw), PARSE_ERROR, f"Parse error: the message is not valid JSON ({bad})")
    refusal = envelope_problem(decoded)
    if refusal is not None:
        return refusal
    request_id = decoded.get("id")  # the envelope is sound: a usable id, or none
    if "method" in decoded and (text := params_problem(decoded["method"], decoded.get("params"))):
        return error(request_id, INVALID_PARAMS, text)
    found = problem(decoded, max_depth=MAX_PARAMS_DEPTH + 2)
    if found is not None:
        path, why = found
        return error(request_id, INVALID_REQUEST, f"Invalid request: the message{shorten(path)} {why}")
    return error(request_id, PARSE_ERROR, f"Parse error: the message is not JSON the server can read ({exc})")


def _batch(items: list[Any]) -> Reply:
    what = "Invalid request: batches (JSON arrays of messages) are not served (MCP has none); send each message alone"
    answers = [
        error(item.get("id") if isinstance(item, dict) else None, INVALID_REQUEST, what)
        for item in items
        if not isinstance(item, dict) or ("method" in item and "id" in item)
    ]
    return BatchReply(answers) if answers else error(None, INVALID_REQUEST, what)


def _usable_id(value: Any) -> bool:
    """An id that can be written back: a string of Unicode text or an integer (MCP: never null)."""
    if isinstance(value, str):
        return _is_text(value)
    return isinstance(value, int) and not isinstance(value, bool)


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {_shown(value)}"
    if isinstance(value, str):
        return f"the string {_shown(value)}" if _is_text(value) else "a string holding a lone UTF-16 surrogate"
    return "an array" if isinstance(value, list) else "an object"


def _shown(value: Any) -> str:
    """A scalar as JSON, at most 200 characters of it."""
    text = json.dumps(value) if isinstance(value, str | int | float | bool) or value is None else _kind(value)
    return text if len(text) <= 200 else text[:200] + "…"


# -- an id found in text that cannot be parsed -------------------------------------------------------

#: A string (skipped whole, in C) or one structural character; everything else is skipped.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\],]')
#: A top-level ``"id"`` as the last member of the outermost object (where the TypeScript SDK puts it).
_ID_AT_END = re.compile(r',\s*"id"\s*:\s*(-?\d{1,30}|"(?:[^"\\]|\\.){0,256}")\s*\}\s*$')


def request_id_in(raw: str | bytes) -> str | int | None:
    """The ``id`` member of a JSON object that cannot be parsed, searched in bounded time: in its first
    :data:`ID_SCAN_CHARS` characters, then as the last member of the object."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    found = _id_in_head(text[:ID_SCAN_CHARS])
    return found if found is not None else _id_at_end(text[-512:])


def _id_in_head(text: str) -> str | int | None:
    """The ``id`` member at depth 1, found without parsing what the object nests (which may be too deep)."""
    depth, expect_key = 0, False
    for token in _TOKEN.finditer(text):
        piece = token.group()
        if piece[0] == '"':
            if depth == 1 and expect_key:
                expect_key = False
                rest = text[token.end() :].lstrip()
                if piece == '"id"' and rest.startswith(":"):
                    return _scalar_id(rest[1:])
        elif piece in "{[":
            depth += 1
            expect_key = depth == 1 and piece == "{"
        elif piece in "}]":
            depth -= 1
        elif depth == 1:  # a comma between members of the top-level object
            expect_key = True
    return None


def _id_at_end(tail: str) -> str | int | None:
    match = _ID_AT_END.search(tail)
    return _scalar_id(match.group(1) + "}") if match else None


def _scalar_id(rest: str) -> str | int | None:
    """The id value at the start of ``rest``; ``None`` unless it is whole (text follows it) and usable."""
    rest = rest.lstrip()
    try:
        value, end = json.JSONDecoder().raw_decode(rest)
    except (ValueError, RecursionError):
        return None
    if end >= len(rest) or not _usable_id(value):  # cut where the id ends: it may be longer
        return None
    return value  # type: ignore[no-any-return]
