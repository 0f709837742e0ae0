"""Structured results of the MCP tools (each becomes the tool's ``outputSchema``).

Plain pydantic models built from runtime values: the runtime knows nothing of MCP, and these
models are the one place its values take their wire shape.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from runtime.sessions import Chunk, LineageGraph, SessionInfo

#: JSON Schema keywords whose values are subschemas: one, a list of them, or a map of them. Only these
#: are walked, so values that are data (``default``, ``examples``, ``const``, ``enum``) are never rewritten.
_ONE_SUBSCHEMA = ("additionalProperties", "items", "not", "contains", "propertyNames", "if", "then", "else")
_LIST_OF_SUBSCHEMAS = ("anyOf", "oneOf", "allOf", "prefixItems", "items")
_MAP_OF_SUBSCHEMAS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def _subschemas(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in _ONE_SUBSCHEMA:
        if isinstance(schema.get(key), dict):
            yield schema[key]
    for key in _LIST_OF_SUBSCHEMAS:
        if isinstance(schema.get(key), list):
            yield from (sub for sub in schema[key] if isinstance(sub, dict))
    for key in _MAP_OF_SUBSCHEMAS:
        if isinstance(schema.get(key), dict):
            yield from (sub for sub in schema[key].values() if isinstance(sub, dict))


def lean_schema(schema: dict[str, Any]) -> None:
    """Rewrite a generated JSON Schema, in place, into an equivalent one that is cheaper to check.

    A client checks every structured result against the tool's outputSchema, and the Python SDK's
    ``jsonschema`` spends about 8 microseconds per subschema it descends into: so drop
    ``additionalProperties: true`` (the default, yet checked key by key). Nullable values stay
    ``anyOf: [{type: X}, {type: null}]``: the one-check spelling ``type: [X, "null"]`` is less
    portable (clients that map schemas onto a single-``type`` dialect, such as Gemini's, refuse it;
    the MCP Inspector's ``--strict`` check warns about it).
    """
    for sub in _subschemas(schema):
        lean_schema(sub)
    if schema.get("additionalProperties") is True:
        del schema["additionalProperties"]


#: Any JSON value, spelled type by type: a schema with no type at all reads as "anything, even not
#: JSON" to schema linters (the MCP Inspector's --strict check) and to clients that need a type.
ANY_JSON_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "object"},
        {"type": "array"},
        {"type": "string"},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
    ]
}
JsonValue = Annotated[Any, WithJsonSchema(ANY_JSON_SCHEMA)]
"""A tool argument or result field that holds any JSON value."""

#: The largest offset or sequence number an argument may hold: SQLite's INTEGER is 64-bit, and
#: JavaScript clients read integers past 2**53 inexactly, so the schema's bound is the largest
#: integer every client reads as written.
MAX_INDEX = 2**53 - 1


class WireModel(BaseModel):
    """The base of every tool result model: its outputSchema is made lean (see ``lean_schema``)."""

    model_config = ConfigDict(json_schema_extra=lean_schema)


class SessionSummary(WireModel):
    """A session without its chunks."""

    session_id: str
    parents: list[str]
    op: str
    length: int = Field(description="number of chunks")
    placement: dict[str, Any]
    usage: dict[str, int]
    metadata: dict[str, Any]
    created_at: float

    @classmethod
    def of(cls, info: SessionInfo, **more: Any) -> Self:
        """The model of ``info``; ``more`` fills a subclass's own fields."""
        return cls(
            session_id=info.id,
            parents=list(info.parents),
            op=info.op,
            length=info.length,
            placement=info.placement.model_dump(mode="json"),
            usage=info.usage.model_dump(mode="json"),
            metadata=dict(info.metadata),
            created_at=info.created_at,
            **more,
        )


def _absent(value: object) -> bool:
    return value is None


class SessionPage(SessionSummary):
    """A session and one page of its chunks."""

    # Described rather than itemised: the Python SDK client checks every item against an items
    # schema on each call (about 8 microseconds a chunk), which for a page of 50 costs more than
    # the rest of the call; the runtime's Chunk model already guarantees each chunk's shape.
    chunks: Annotated[list[Chunk], WithJsonSchema({"type": "array"})] = Field(
        description="oldest first; each {kind: system|user|assistant|tool_result, content, tool_calls?,"
        " tool_call_id?, name?, trust: user|model|tool|external}; empty when the page is over 256 KB: they"
        " are then the artifact at uri (a JSON array)"
    )
    offset: int
    next_offset: int | None = Field(description="pass as offset for the next page; null at the end")
    # Only in a page over 256 KB (left out of every other answer: exclude_if).
    artifact_id: str | None = Field(
        default=None, exclude_if=_absent, description="the artifact holding a page over 256 KB (JSON)"
    )
    uri: str | None = Field(default=None, exclude_if=_absent, description="rath://artifacts/{artifact_id}: its chunks")
    preview: str | None = Field(default=None, exclude_if=_absent, description="the start of a page over 256 KB")


class SessionList(WireModel):
    sessions: list[SessionSummary]
    next_cursor: str | None = Field(description="pass as cursor for the next page; null at the end")


class ForkResult(WireModel):
    session_ids: list[str]
    parent_id: str


class LineageResult(WireModel):
    session_id: str
    nodes: list[dict[str, Any]]
    edges: list[dict[str, str]]
    mermaid: str

    @classmethod
    def of(cls, graph: LineageGraph) -> LineageResult:
        return cls(
            session_id=graph.root,
            nodes=[n.model_dump(mode="json") for n in graph.nodes],
            edges=[e.model_dump(mode="json") for e in graph.edges],
            mermaid=graph.mermaid(),
        )


class ExportResult(WireModel):
    session_id: str
    jsonl: str | None = Field(
        description="the JSONL; null when it is over 256 KB: it is then the artifact at uri (read that resource)"
    )
    artifact_id: str | None = Field(default=None, description="the artifact holding a large export")
    uri: str | None = Field(default=None, description="rath://artifacts/{artifact_id}, for a large export")
    preview: str | None = Field(default=None, description="the start of a large export")
