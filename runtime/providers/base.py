"""The provider protocol: one request shape in, one response shape out, whatever the model vendor.

Every provider (``openai``, ``anthropic``, ``sampling``, ``scripted``) turns a ``ModelRequest`` (the
session's chunks, a system prompt, tool specs) into a ``ModelResponse`` (text, tool calls in the
OpenAI shape, usage). Streaming is optional and additive: pass ``on_delta`` to receive text as it
arrives; the returned response is the same either way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from runtime.errors import RathError, UsageError
from runtime.sessions.model import Chunk, ToolCall, Usage

DeltaCallback = Callable[[str], Awaitable[None]]


class ProviderError(RathError):
    """A model provider failed to answer (after retries, where retrying made sense).

    ``status`` is the HTTP status when there was one; ``retryable`` says whether the failure was
    of the kind retried (429, 5xx, connection); the message never holds credentials.
    """

    def __init__(self, message: str, *, provider: str, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.retryable = retryable


class ProviderConfigError(UsageError):
    """A provider was asked for with missing or contradictory configuration."""


class TokenBudgetExceeded(UsageError):
    """A run spent more tokens than its budget allowed."""


@dataclass(frozen=True)
class ToolSpec:
    """What a model is told about one tool: a name, what it is for, a JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ModelRequest:
    """One model call: the conversation so far plus what the model may do next."""

    messages: list[Chunk]
    system: str | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int | None = None
    temperature: float | None = None
    model: str | None = None

    def last_user_text(self) -> str:
        """The content of the last ``user`` chunk ("" when there is none)."""
        for chunk in reversed(self.messages):
            if chunk.kind == "user":
                return chunk.content
        return ""


@dataclass(frozen=True)
class ModelResponse:
    """One model answer: text, tool calls (OpenAI shape), usage, why it stopped, which model."""

    content: str
    tool_calls: list[ToolCall]
    usage: Usage
    stop_reason: str
    model: str

    def as_chunk(self) -> Chunk:
        """The answer as an ``assistant`` chunk to append to a session."""
        return Chunk(kind="assistant", content=self.content, tool_calls=tuple(self.tool_calls) or None)


@runtime_checkable
class Provider(Protocol):
    """Anything that answers a ``ModelRequest``."""

    name: str

    async def complete(self, request: ModelRequest, *, on_delta: DeltaCallback | None = None) -> ModelResponse: ...


def arguments_object(raw: str) -> dict[str, Any]:
    """A tool call's JSON arguments as the object that block APIs (Anthropic, MCP sampling) want as input.

    Text that is not JSON is kept under ``_unparsed``, a JSON value that is not an object under ``_value``.
    """
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"_unparsed": raw}
    return value if isinstance(value, dict) else {"_value": value}


def block_turns(
    request: ModelRequest, blocks: Callable[[Chunk], list[dict[str, Any]]]
) -> tuple[list[str], list[dict[str, Any]]]:
    """The system texts (prompt first, then ``system`` chunks) and the user/assistant turns of a request.

    Each other chunk becomes content ``blocks``; consecutive chunks of one role share a turn.
    """
    system = [request.system] if request.system else []
    turns: list[dict[str, Any]] = []
    for chunk in request.messages:
        if chunk.kind == "system":
            system.append(chunk.content)
            continue
        role = "assistant" if chunk.kind == "assistant" else "user"
        content = blocks(chunk)
        if not content:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(content)
        else:
            turns.append({"role": role, "content": content})
    return system, turns


def last_user_message(chunks: Sequence[Chunk]) -> str:
    """What the user last wrote: the last unnamed ``user`` chunk ("" when there is none).

    User chunks the runtime adds (recalled memory, team notes, the selector's question) carry a name.
    """
    return next((c.content for c in reversed(chunks) if c.kind == "user" and not c.name), "")


def usage_of(prompt: int | None, completion: int | None) -> Usage:
    """A ``Usage`` from vendor counts that may be missing."""
    p, c = max(0, prompt or 0), max(0, completion or 0)
    return Usage(prompt_tokens=p, completion_tokens=c, total_tokens=p + c)


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret (of 4+ characters) replaced by ``***``: errors may echo request headers."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def safe_url(url: object) -> str:
    """A URL for reprs and messages: any ``user:password@`` part is dropped."""
    return re.sub(r"//[^/@]*@", "//", str(url))


def estimate_tokens(text: str) -> int:
    """A rough, deterministic token count (about four characters a token) for providers without one."""
    return (len(text) + 3) // 4


def estimate_prompt_tokens(request: ModelRequest) -> int:
    """``estimate_tokens`` of what a request sends: its chunks and its system prompt."""
    return sum(estimate_tokens(c.content) for c in request.messages) + estimate_tokens(request.system or "")


class TokenBudget:
    """A running total of tokens against a limit, shared by whoever holds it (an agent, a team)."""

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise UsageError(f"token budget must be a positive number of tokens, got {limit}")
        self.limit = limit
        self.spent = 0

    def charge(self, usage: Usage) -> None:
        self.spent += usage.total_tokens

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.limit

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.spent)
