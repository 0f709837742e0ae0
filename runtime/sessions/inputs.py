"""What the session engine accepts from callers, made into its own values or refused with a clear error.

Chunks, usage, placement and metadata arrive as models or as plain JSON (from MCP, the CLI, a
workflow); each is validated here once, and a bad one is an ``InvalidInputError`` saying what is
wrong and what the value should look like.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any, TypeVar

from runtime.errors import InvalidInputError
from runtime.jsonvalue import check_json
from runtime.sessions.model import Chunk, Placement, Usage
from runtime.sessions.store import StoredChunk

M = TypeVar("M", Usage, Placement)


def new_uid() -> str:
    return os.urandom(8).hex()


def fresh(chunks: Iterable[Chunk]) -> tuple[StoredChunk, ...]:
    return tuple(StoredChunk(new_uid(), c) for c in chunks)


def as_chunks(items: Iterable[Chunk | dict[str, Any]]) -> list[Chunk]:
    out = []
    for i, item in enumerate(items):
        if isinstance(item, Chunk):
            out.append(item)
            continue
        try:
            out.append(Chunk.model_validate(item))
        except ValueError as exc:
            raise InvalidInputError(
                f"chunk {i} is not valid: {exc}. A chunk is {{kind: system|user|assistant|tool_result, "
                "content, tool_calls?, tool_call_id?, name?}"
            ) from None
    return out


def json_object(value: dict[str, Any] | None) -> dict[str, Any]:
    """``metadata`` as it will read back: a JSON object (tuples become lists); else a clear error."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInputError(f"metadata must be a JSON object (a dict), got {type(value).__name__}")
    check_json(value, "metadata")
    try:
        normal: dict[str, Any] = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"metadata must be plain JSON (str, number, bool, null, list, dict; no NaN): {exc}"
        ) from None
    return normal


def model_of(cls: type[M], value: M | dict[str, Any] | None, what: str) -> M | None:
    """``value`` as a ``cls`` (a dict is validated), or a clear error naming the field."""
    if value is None or isinstance(value, cls):
        return value
    try:
        return cls.model_validate(value)
    except ValueError as exc:
        fields = ", ".join(cls.model_fields)
        raise InvalidInputError(f"{what} is not valid ({exc}); it is an object with {fields}") from None
