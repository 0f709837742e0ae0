"""The ``scripted`` provider: deterministic replies and tool calls from a JSON script.

Shipped for tests, demos and offline use; it runs only when chosen (``RATH_PROVIDER=scripted``,
``"provider": "scripted"`` in config.json, ``input.provider``, or registered by code), never in
place of a model nobody configured. A script is a JSON file (or the same structure in Python)::

    {"replies": [
        {"content": "I will write the file.",
         "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}]},
        {"when": "weather", "content": "Sunny.", "repeat": true},
        {"content": "Done.", "usage": {"prompt_tokens": 12, "completion_tokens": 3}}
    ]}

(a bare list of replies is accepted too). On each call the provider takes the first reply, in
order, that is still unused and whose ``when`` (if any) occurs in the last user message
(case-insensitive). A reply is used up once taken unless it says ``"repeat": true``. Tool call
ids are ``call_<n>`` unless the reply gives an ``id``. ``usage`` defaults to a deterministic
estimate (about four characters a token). When no reply fits the error says so and names the file.

``ScriptedProvider(None)`` (no script at all) answers every request by echoing the last message
the user wrote (unnamed ``user`` chunk), marked ``(scripted echo)`` so nobody takes it for a
model's answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.errors import InvalidInputError
from runtime.providers.base import (
    DeltaCallback,
    ModelRequest,
    ModelResponse,
    ProviderError,
    estimate_prompt_tokens,
    estimate_tokens,
    last_user_message,
    usage_of,
)
from runtime.sessions.model import ToolCall, ToolCallFunction, Usage

_FIELDS = {"content", "tool_calls", "usage", "when", "repeat", "stop_reason"}


@dataclass(frozen=True)
class ScriptedReply:
    content: str
    tool_calls: tuple[tuple[str | None, str, str], ...]  # (id, name, arguments as JSON text)
    usage: Usage | None
    when: str | None
    repeat: bool
    stop_reason: str | None


@dataclass
class _State:
    used: set[int] = field(default_factory=set)
    calls: int = 0
    tool_calls: int = 0


def _parse_call(where: str, raw: Any) -> tuple[str | None, str, str]:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise InvalidInputError(f"{where}: a tool call is {{'name': str, 'arguments': object, 'id'?: str}}")
    args = raw.get("arguments", {})
    text = args if isinstance(args, str) else json.dumps(args)
    call_id = raw.get("id")
    return (str(call_id) if call_id is not None else None), raw["name"], text


def _parse_reply(where: str, raw: Any) -> ScriptedReply:
    if isinstance(raw, str):
        raw = {"content": raw}
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{where} must be an object like {{'content': '...'}} or a string")
    unknown = set(raw) - _FIELDS
    if unknown:
        raise InvalidInputError(f"{where} has unknown field(s) {sorted(unknown)}; allowed: {sorted(_FIELDS)}")
    usage = None
    if raw.get("usage") is not None:
        u = raw["usage"]
        try:
            p, c = int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0))
        except (AttributeError, TypeError, ValueError):
            raise InvalidInputError(
                f"{where}.usage must be {{'prompt_tokens': int, 'completion_tokens': int}}"
            ) from None
        usage = Usage(prompt_tokens=p, completion_tokens=c, total_tokens=p + c)
    calls = tuple(_parse_call(f"{where}.tool_calls[{i}]", c) for i, c in enumerate(raw.get("tool_calls") or []))
    when = raw.get("when")
    return ScriptedReply(
        content=str(raw.get("content") or ""),
        tool_calls=calls,
        usage=usage,
        when=str(when).lower() if when else None,
        repeat=bool(raw.get("repeat", False)),
        stop_reason=raw.get("stop_reason"),
    )


def parse_script(data: Any, source: str = "script") -> list[ScriptedReply]:
    """Validate a script (a list of replies, or ``{"replies": [...]}``) into replies."""
    replies = data.get("replies") if isinstance(data, dict) else data
    if not isinstance(replies, list):
        raise InvalidInputError(f"{source}: a script is a list of replies or {{'replies': [...]}}")
    return [_parse_reply(f"{source}: replies[{i}]", r) for i, r in enumerate(replies)]


def load_script(path: Path) -> list[ScriptedReply]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInputError(
            f"cannot read the scripted-provider file {path}: {exc.strerror}; check RATH_SCRIPT"
        ) from None
    except ValueError as exc:
        raise InvalidInputError(f"the scripted-provider file {path} is not valid JSON: {exc}") from None
    return parse_script(data, str(path))


class ScriptedProvider:
    """Deterministic answers from a script; see the module docstring for the format."""

    name = "scripted"

    def __init__(self, script: list[dict[str, Any]] | dict[str, Any] | Path | str | None = None) -> None:
        self.source = "echo (no script)"
        self.replies: list[ScriptedReply] | None = None
        if isinstance(script, (str, Path)):
            self.source = str(script)
            self.replies = load_script(Path(script))
        elif script is not None:
            self.source = "inline script"
            self.replies = parse_script(script, self.source)
        self._state = _State()

    def __repr__(self) -> str:
        return f"ScriptedProvider(source={self.source!r})"

    @property
    def calls(self) -> int:
        """How many requests this provider has answered."""
        return self._state.calls

    def _pick(self, request: ModelRequest) -> ScriptedReply:
        if self.replies is None:
            text = last_user_message(request.messages)
            return ScriptedReply(f"(scripted echo) {text}", (), None, None, True, None)
        user = request.last_user_text().lower()
        for index, reply in enumerate(self.replies):
            if index in self._state.used or (reply.when is not None and reply.when not in user):
                continue
            if not reply.repeat:
                self._state.used.add(index)
            return reply
        raise ProviderError(
            f"scripted provider: no reply left in {self.source} for call {self._state.calls + 1} "
            f"(last user message: {request.last_user_text()[:80]!r}); add a reply to the script",
            provider=self.name,
        )

    async def complete(self, request: ModelRequest, *, on_delta: DeltaCallback | None = None) -> ModelResponse:
        reply = self._pick(request)
        self._state.calls += 1
        calls = []
        for call_id, name, args in reply.tool_calls:
            self._state.tool_calls += 1
            calls.append(
                ToolCall(
                    id=call_id or f"call_{self._state.tool_calls}", function=ToolCallFunction(name=name, arguments=args)
                )
            )
        if on_delta is not None and reply.content:
            for piece in re.findall(r"\s*\S+\s*|\s+", reply.content):
                await on_delta(piece)
        usage = reply.usage
        if usage is None:
            completion = estimate_tokens(reply.content) + sum(estimate_tokens(a) for _, _, a in reply.tool_calls)
            usage = usage_of(estimate_prompt_tokens(request), completion)
        stop = reply.stop_reason or ("tool_calls" if calls else "stop")
        return ModelResponse(reply.content, calls, usage, stop, request.model or "scripted")
