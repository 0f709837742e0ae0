"""A local HTTP server speaking the OpenAI chat-completions and Anthropic messages wire formats.

It answers from a queue of replies the test sets up (text, tool calls, usage, or an HTTP failure),
plain or streamed as SSE exactly as the vendors do, and records every request it received so tests
can check what the real SDKs sent. It runs uvicorn in a thread on 127.0.0.1 and a free port.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Reply:
    """One model answer the server will give."""

    content: str = ""
    tool_calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (id, name, arguments)
    prompt_tokens: int = 11
    completion_tokens: int = 7
    delay_s: float = 0.0  # wait this long before answering (to exercise client timeouts)
    cut_after: int | None = None  # streamed: drop the connection after this many events


@dataclass
class Failure:
    """An HTTP error the server will answer with instead of a reply."""

    status: int
    message: str = "simulated failure"
    retry_after: str | None = None


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeModelServer:
    """The queue of answers plus the ASGI app that serves them."""

    def __init__(self) -> None:
        self.queue: list[Reply | Failure] = []
        self.received: list[Received] = []
        self.url = ""
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
            ]
        )

    def add(self, *items: Reply | Failure) -> None:
        self.queue.extend(items)

    async def _next(self, request: Request) -> tuple[dict[str, Any], Reply | Failure]:
        body = await request.json()
        self.received.append(Received(request.url.path, {k.lower(): v for k, v in request.headers.items()}, body))
        item = self.queue.pop(0) if self.queue else Failure(500, "fake server: no reply queued")
        if isinstance(item, Reply) and item.delay_s:
            await anyio.sleep(item.delay_s)
        return body, item

    # -- OpenAI --------------------------------------------------------------------------------
    async def _openai(self, request: Request) -> Response:
        body, item = await self._next(request)
        if isinstance(item, Failure):
            headers = {"retry-after": item.retry_after} if item.retry_after else {}
            err = {"error": {"message": item.message, "type": "server_error", "code": None, "param": None}}
            return JSONResponse(err, status_code=item.status, headers=headers)
        model = body.get("model", "fake")
        if body.get("stream"):
            return StreamingResponse(
                _sse(_openai_chunks(item, model), cut=item.cut_after), media_type="text/event-stream"
            )
        message: dict[str, Any] = {"role": "assistant", "content": item.content or None}
        if item.tool_calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, n, a in item.tool_calls
            ]
        return JSONResponse(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if item.tool_calls else "stop",
                        "logprobs": None,
                    }
                ],
                "usage": _openai_usage(item),
            }
        )

    # -- Anthropic -----------------------------------------------------------------------------
    async def _anthropic(self, request: Request) -> Response:
        body, item = await self._next(request)
        if isinstance(item, Failure):
            headers = {"retry-after": item.retry_after} if item.retry_after else {}
            kind = "rate_limit_error" if item.status == 429 else "api_error"
            err = {"type": "error", "error": {"type": kind, "message": item.message}}
            return JSONResponse(err, status_code=item.status, headers=headers)
        model = body.get("model", "fake")
        if body.get("stream"):
            events = _sse(_anthropic_events(item, model), named=True, cut=item.cut_after)
            return StreamingResponse(events, media_type="text/event-stream")
        content: list[dict[str, Any]] = [{"type": "text", "text": item.content}] if item.content else []
        content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in item.tool_calls]
        return JSONResponse(
            {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": "tool_use" if item.tool_calls else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": item.prompt_tokens, "output_tokens": item.completion_tokens},
            }
        )


def _openai_usage(item: Reply) -> dict[str, int]:
    total = item.prompt_tokens + item.completion_tokens
    return {"prompt_tokens": item.prompt_tokens, "completion_tokens": item.completion_tokens, "total_tokens": total}


def _pieces(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _openai_chunks(item: Reply, model: str) -> Iterator[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(item.content):
        yield chunk({"content": piece})
    for index, (call_id, name, args) in enumerate(item.tool_calls):
        head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        yield chunk({"tool_calls": [head]})
        for piece in _pieces(json.dumps(args), 5):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if item.tool_calls else "stop")
    yield {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [],
        "usage": _openai_usage(item),
    }


def _anthropic_events(item: Reply, model: str) -> Iterator[dict[str, Any]]:
    yield {
        "type": "message_start",
        "message": {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": item.prompt_tokens, "output_tokens": 1},
        },
    }
    index = 0
    if item.content:
        yield {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
        for piece in _pieces(item.content):
            yield {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
        yield {"type": "content_block_stop", "index": 0}
        index = 1
    for call_id, name, args in item.tool_calls:
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        yield {"type": "content_block_start", "index": index, "content_block": block}
        for piece in _pieces(json.dumps(args), 5):
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
        index += 1
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use" if item.tool_calls else "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": item.completion_tokens},
    }
    yield {"type": "message_stop"}


class Cut(Exception):
    """Raised inside a streamed body: uvicorn drops the connection mid-stream, as a failing proxy would."""


async def _sse(
    events: Iterator[dict[str, Any]], *, named: bool = False, cut: int | None = None
) -> AsyncIterator[bytes]:
    for index, event in enumerate(events):
        if cut is not None and index >= cut:
            raise Cut("connection dropped mid-stream")
        prefix = f"event: {event['type']}\n" if named else ""
        yield f"{prefix}data: {json.dumps(event)}\n\n".encode()
    if not named:
        yield b"data: [DONE]\n\n"


@contextmanager
def serve(server: FakeModelServer) -> Iterator[FakeModelServer]:
    """Run ``server`` on 127.0.0.1 on a free port in a thread for the duration of the block."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(server.app, log_level="warning", lifespan="off", access_log=False)
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started:  # the server thread signals readiness through this flag only
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("fake model server did not start")
        time.sleep(0.01)
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        uv.should_exit = True
        thread.join(10)
        sock.close()
