"""``Selector``: LLM-chosen control flow (the ``if``/``while`` of the OpenRath analogy).

Given described choices (usually workflows: a name and what each is for), the model is asked which
should handle the session next, through a ``choose`` tool whose ``name`` is an enum of the choices,
or in plain text. Answers are read leniently (the tool call, a JSON object, the bare name, or text
that names exactly one choice). An answer that names none, or several, falls back to the default
choice and says so in ``Selection.reason`` with ``fallback=True``: never a silent guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runtime.errors import InvalidInputError
from runtime.providers.base import ModelRequest, ModelResponse, Provider, ToolSpec
from runtime.sessions.model import Chunk, Usage

if TYPE_CHECKING:
    from runtime.flow.services import Services

CHOOSE_TOOL = "choose"


@dataclass(frozen=True)
class Choice:
    """One option: a name and what it is for."""

    name: str
    description: str


@dataclass(frozen=True)
class Selection:
    """The chosen option, why, whether it is a fallback, and what the choice cost."""

    name: str
    reason: str
    fallback: bool
    usage: Usage
    answer: str


def _choices(raw: Sequence[Choice | Mapping[str, Any]]) -> list[Choice]:
    out = [c if isinstance(c, Choice) else Choice(str(c["name"]), str(c.get("description") or "")) for c in raw]
    if not out:
        raise InvalidInputError("a Selector needs at least one choice")
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"choice names must be distinct, got {names}")
    return out


class Selector:
    """Ask ``provider`` which of ``choices`` should act next; fall back to ``default`` on an unusable answer."""

    def __init__(
        self,
        provider: Provider,
        choices: Sequence[Choice | Mapping[str, Any]],
        *,
        default: str | None = None,
        instructions: str = "",
    ) -> None:
        self.provider = provider
        self.choices = _choices(choices)
        self.default = default or self.choices[0].name
        if self.default not in self.names:
            raise InvalidInputError(f"default {self.default!r} is not one of the choices {self.names}")
        self.instructions = instructions

    @classmethod
    def from_workflows(
        cls, rt: Services, provider: Provider, names: Sequence[str] | None = None, **kwargs: Any
    ) -> Selector:
        """A selector over the runtime's registered workflows (all, or those in ``names``)."""
        described = [w for w in rt.workflows.describe() if names is None or w["name"] in names]
        return cls(provider, described, **kwargs)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.choices]

    def _request(self, messages: Sequence[Chunk]) -> ModelRequest:
        menu = "\n".join(f"- {c.name}: {c.description}" for c in self.choices)
        system = (
            "You decide who handles the conversation next. Choose exactly one of:\n"
            f"{menu}\n"
            f"Call the `{CHOOSE_TOOL}` tool with the name (and a short reason), or answer with the name alone."
        )
        if self.instructions:
            system += "\n" + self.instructions
        schema = {
            "type": "object",
            "properties": {"name": {"type": "string", "enum": self.names}, "reason": {"type": "string"}},
            "required": ["name"],
        }
        tool = ToolSpec(CHOOSE_TOOL, "Pick who handles the conversation next.", schema)
        # The question comes last, so a model answers it rather than carrying on the conversation.
        question = Chunk(kind="user", name="selector", content=f"Who should act next? One of: {', '.join(self.names)}.")
        return ModelRequest([*messages, question], system, [tool], max_tokens=200, temperature=0.0)

    async def choose(self, messages: Sequence[Chunk]) -> Selection:
        """Pick the next choice for a conversation."""
        response = await self.provider.complete(self._request(messages))
        return self.interpret(response)

    async def select(self, rt: Services, session_id: str) -> Selection:
        """Pick the next choice for a stored session."""
        return await self.choose((await rt.sessions.get(session_id)).chunks)

    def interpret(self, response: ModelResponse) -> Selection:
        """Read a model answer as a choice, or fall back with a reason saying what was wrong."""
        for call in response.tool_calls:
            if call.function.name != CHOOSE_TOOL:
                continue
            try:
                args = json.loads(call.function.arguments or "{}")
            except ValueError:
                args = {}
            name = self._match(str(args.get("name", ""))) if isinstance(args, dict) else None
            if name is not None:
                reason = str(args.get("reason") or "chosen by the model")
                return Selection(name, reason, False, response.usage, call.function.arguments)
        name = self._from_text(response.content)
        if name is not None:
            return Selection(name, "named in the model's answer", False, response.usage, response.content)
        shown = (response.content or ", ".join(c.function.arguments for c in response.tool_calls))[:120]
        reason = f"the model's answer {shown!r} names none (or several) of {self.names}; fell back to {self.default!r}"
        return Selection(self.default, reason, True, response.usage, response.content)

    def _match(self, text: str) -> str | None:
        wanted = text.strip().strip("`'\".,:;!").lower()
        return next((n for n in self.names if n.lower() == wanted), None)

    def _from_text(self, text: str) -> str | None:
        exact = self._match(text)
        if exact is not None:
            return exact
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            for key in ("name", "choice", "workflow"):
                if isinstance(data.get(key), str) and (found := self._match(data[key])) is not None:
                    return found
        mentioned = {n for n in self.names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text, re.IGNORECASE)}
        return mentioned.pop() if len(mentioned) == 1 else None
