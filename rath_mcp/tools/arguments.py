"""The types of the tools' arguments: every string and list bounded, every value typed strictly.

CONTRACT §4: an id is at most 64 characters and every string and list has a limit in its
schema. The limits are declared here once, as pydantic constraints, so the published inputSchema
states them and the argument model (validated in strict mode, see ``rath_mcp.sdk.strict_arguments``)
enforces them before a tool does any work. They also bound the work one call can ask for: a
recall query, a message or an import is small enough that serving it never holds up the event
loop for long (``bench/headofline.py`` measures that).

JSON-valued arguments (``metadata``, ``input``, ``state_patch``, ``value``, ``result``) are walked
once (without recursion) for the same kind of limits on what is inside them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError

from rath_mcp.waiting import MAX_WAIT_S
from runtime.memory.model import MAX_PATH_CHARS, MAX_TAG_CHARS, MAX_TAGS

ID_CHARS = 64
"""An id (``ses_…``, ``run_…``, ``int_…``, ``eff_…``, ``mem_…``): 28 characters today, 64 at most."""
NAME_CHARS = 128
"""A workflow or workspace name (a workspace name becomes a directory: the sandbox allows 128)."""
KEY_CHARS = 200
"""An idempotency key (a UUID, a hash, or a caller's own composite key)."""
REASON_CHARS = 2_000
"""Why a run was cancelled or an interrupt decided."""
QUERY_CHARS = 2_000
"""A recall query: only its first 128 distinct terms count (``runtime.memory``), so more is wasted work."""
TEXT_CHARS = 200_000
"""One message (a chunk's content, a system prompt, a delegated task): the size memory takes as one item."""
JSONL_CHARS = 1_000_000
"""An export to import (``session_export`` refuses to make a larger one, so what it makes imports)."""
PAGE_CHARS = 1_000_000
"""The content one ``session_get`` page holds at most (besides at least one chunk): an answer's size is bounded too."""
URI_CHARS = len("memory://resources/") + MAX_PATH_CHARS
"""A ``memory://`` URI: the longest scope and the longest path."""
LIST_ITEMS = 64
"""Session ids to merge."""
MAX_DEADLINE_S = 366 * 86_400.0
"""A run's deadline: at most a year away."""

#: Limits inside a JSON-valued argument.
JSON_STRING_CHARS = TEXT_CHARS
JSON_KEY_CHARS = 256
JSON_MEMBERS = 1_000
"""Members of one object or items of one array."""
JSON_NODES = 10_000
"""Values in the whole argument, at every level."""
JSON_TEXT_CHARS = 1_000_000
"""Characters of every string and key in the whole argument."""


def _id(what: str) -> Any:
    return Field(min_length=1, max_length=ID_CHARS, description=what)


SessionId = Annotated[str, _id("a session id, ses_…")]
RunId = Annotated[str, _id("a run id, run_…")]
InterruptId = Annotated[str, _id("an interrupt id, int_…")]
EffectId = Annotated[str, _id("an effect id, eff_…")]
MemoryId = Annotated[str | None, _id("a memory item's id, mem_…")]
SessionIds = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=ID_CHARS)]],
    Field(min_length=2, max_length=LIST_ITEMS, description="two or more session ids, ses_…"),
]


def _cursor(prefix: str) -> Any:
    """A page cursor: the ``next_cursor`` of the previous page, which is the id of that page's last item."""
    return Field(
        max_length=ID_CHARS,
        pattern=rf"^{prefix}_[0-9a-f]{{24}}$",
        description="the next_cursor of the previous page; omit it for the first page",
    )


SessionCursor = Annotated[str | None, _cursor("ses")]
RunCursor = Annotated[str | None, _cursor("run")]
MemoryCursor = Annotated[str | None, _cursor("mem")]
Text = Annotated[str, Field(max_length=TEXT_CHARS)]
"""A message (give it a description with another ``Field``)."""
OptionalText = Annotated[str | None, Field(max_length=TEXT_CHARS)]
WorkflowName = Annotated[str, Field(min_length=1, max_length=NAME_CHARS, description="a workflow's name")]
Workspace = Annotated[
    str | None, Field(max_length=NAME_CHARS, description="sandbox workspace name for the session's tools")
]
IdempotencyKey = Annotated[
    str | None,
    Field(max_length=KEY_CHARS, description="the same request repeated with this key returns the same run"),
]
Reason = Annotated[str | None, Field(max_length=REASON_CHARS, description="why, in words, for the record")]
MemoryPath = Annotated[
    str | None, Field(max_length=MAX_PATH_CHARS, description="where under the scope; defaults to the new id")
]
Tags = Annotated[
    list[Annotated[str, Field(max_length=MAX_TAG_CHARS)]] | None, Field(max_length=MAX_TAGS, description="labels")
]
WaitS = Annotated[
    float, Field(ge=0, le=MAX_WAIT_S, description=f"seconds to wait for the run to settle, 0..{MAX_WAIT_S:g}")
]
TimeoutS = Annotated[float, Field(ge=0, le=MAX_WAIT_S, description=f"seconds to wait at most, 0..{MAX_WAIT_S:g}")]
Priority = Annotated[
    int, Field(ge=-100, le=100, description="-100..100: a higher run is claimed before a lower one (default 0)")
]
DeadlineS = Annotated[
    float | None, Field(gt=0, le=MAX_DEADLINE_S, description="seconds the run may take before it is timed out")
]
RecallMode = Annotated[
    Literal["keyword", "semantic", "hybrid"] | None,
    Field(description="keyword (BM25), semantic (embeddings) or hybrid (both, fused); default hybrid with an embedder"),
]
RunStatus = Literal["queued", "running", "waiting", "succeeded", "failed", "cancelled", "timed_out", "needs_review"]


def _json_limits(value: Any) -> Any:
    """``value`` when every part of it is within the JSON limits, else a validation error saying where and which."""
    nodes = chars = 0
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        nodes += 1
        if nodes > JSON_NODES:
            raise _too_big(f"holds more than {JSON_NODES} values in all; send less")
        if isinstance(item, str):
            chars += len(item)
            if len(item) > JSON_STRING_CHARS:
                raise _too_big(f"{_at(path)}a string of {len(item)} characters; the limit is {JSON_STRING_CHARS}")
        elif isinstance(item, dict):
            if len(item) > JSON_MEMBERS:
                raise _too_big(f"{_at(path)}an object of {len(item)} members; the limit is {JSON_MEMBERS}")
            for key, sub in item.items():
                chars += len(key)
                if len(key) > JSON_KEY_CHARS:
                    raise _too_big(f"{_at(path)}a key of {len(key)} characters; the limit is {JSON_KEY_CHARS}")
                stack.append((sub, f"{path}.{key[:40]}" if len(path) < 200 else path))
        elif isinstance(item, list):
            if len(item) > JSON_MEMBERS:
                raise _too_big(f"{_at(path)}an array of {len(item)} items; the limit is {JSON_MEMBERS}")
            stack.extend((sub, f"{path}[{i}]" if len(path) < 200 else path) for i, sub in enumerate(item))
        if chars > JSON_TEXT_CHARS:
            raise _too_big(f"holds more than {JSON_TEXT_CHARS} characters of text in all; send less")
    return value


def _at(path: str) -> str:
    return f"at {path}, " if path else ""


def _too_big(why: str) -> PydanticCustomError:
    return PydanticCustomError("json_too_large", "{why}", {"why": why})


#: The published schema of a JSON-valued argument: one typed alternative per kind of JSON value (a
#: schema with no type reads as "anything" to schema linters), each bounded.
_BOUNDED_JSON_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "object", "maxProperties": JSON_MEMBERS},
        {"type": "array", "maxItems": JSON_MEMBERS},
        {"type": "string", "maxLength": JSON_STRING_CHARS},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
    ]
}
INSIDE = (
    f"; inside it, at most {JSON_MEMBERS} members per object or array, {JSON_STRING_CHARS} characters per string,"
    f" {JSON_NODES} values and {JSON_TEXT_CHARS} characters of text in all"
)


JsonArgument = Annotated[Any, AfterValidator(_json_limits), WithJsonSchema(_BOUNDED_JSON_SCHEMA)]
"""Any JSON value, bounded inside (say so in its description: ``… + INSIDE``)."""
JsonObject = Annotated[
    dict[str, Any] | None,
    AfterValidator(_json_limits),
    WithJsonSchema({"anyOf": [{"type": "object", "maxProperties": JSON_MEMBERS}, {"type": "null"}]}),
]
"""A JSON object or null, bounded inside (say so in its description: ``… + INSIDE``)."""
