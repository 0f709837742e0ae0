"""The Session value: an immutable snapshot of ordered chunks with placement, lineage and usage."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ChunkKind = Literal["system", "user", "assistant", "tool_result"]
Trust = Literal["user", "model", "tool", "external"]
#: Where a chunk's text came from when nothing says otherwise: what people running the agent wrote
#: (system prompts, user turns), what a model wrote, what a tool returned. ``external`` (fetched or
#: imported from elsewhere) is never a default: the code that brings such text in says so.
TRUST_OF_KIND: dict[str, Trust] = {"system": "user", "user": "user", "assistant": "model", "tool_result": "tool"}
SessionOp = Literal["create", "append", "fork", "detach", "merge", "compress", "run", "import"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCallFunction(_Frozen):
    name: str
    arguments: str = "{}"


class ToolCall(_Frozen):
    """A tool call in the OpenAI shape ``{id, type, function: {name, arguments}}``."""

    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction


def _absent(value: object) -> bool:
    return value is None


class Chunk(_Frozen):
    """One entry of a session: a message of a kind (the OpenRath ChunkRow kinds).

    Absent optional fields are left out wherever a chunk is serialized, including inside other
    models (a page of chunks is dumped in one pass, not chunk by chunk).
    """

    kind: ChunkKind
    content: str = ""
    tool_calls: tuple[ToolCall, ...] | None = Field(default=None, exclude_if=_absent)
    tool_call_id: str | None = Field(default=None, exclude_if=_absent)
    name: str | None = Field(default=None, exclude_if=_absent)
    trust: Trust = "user"
    """Where the text came from (``TRUST_OF_KIND`` of its kind unless given); a policy may treat
    ``tool``/``external`` text as untrusted input (prompt injection)."""

    @model_validator(mode="before")
    @classmethod
    def _trust_of_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("trust") is None:
            return {**data, "trust": TRUST_OF_KIND.get(data.get("kind", ""), "user")}
        return data

    def public(self) -> dict[str, Any]:
        """The chunk as plain JSON, without absent optional fields."""
        return self.model_dump(mode="json")


class Usage(_Frozen):
    """Token usage accumulated by a session's history."""

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    total_tokens: int = Field(default=0, ge=0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )

    def minus(self, other: Usage) -> Usage:
        """The delta of this usage over an ancestor's (never below zero)."""
        return Usage(
            prompt_tokens=max(0, self.prompt_tokens - other.prompt_tokens),
            completion_tokens=max(0, self.completion_tokens - other.completion_tokens),
            total_tokens=max(0, self.total_tokens - other.total_tokens),
        )


class Placement(_Frozen):
    """Where a session's tools run: a sandbox backend and a workspace in it."""

    backend: str = "local"
    workspace: str | None = None


class SessionInfo(_Frozen):
    """A session without its chunks: what lists and summaries carry."""

    id: str
    parents: tuple[str, ...] = ()
    op: SessionOp
    length: int
    placement: Placement = Placement()
    usage: Usage = Usage()
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: float
    tenant: str = "local"
    project: str = "default"

    def summary(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Session(SessionInfo):
    """An immutable snapshot: the value that flows between agents and workflows."""

    chunks: tuple[Chunk, ...] = ()

    @property
    def info(self) -> SessionInfo:
        return SessionInfo.model_validate(self.model_dump(exclude={"chunks"}))

    @property
    def last(self) -> Chunk | None:
        return self.chunks[-1] if self.chunks else None

    def messages(self) -> list[dict[str, Any]]:
        """The chunks as plain JSON dicts, in order."""
        return [c.public() for c in self.chunks]


class LineageNode(_Frozen):
    id: str
    op: str
    length: int
    created_at: float
    stub: bool = False


class LineageEdge(_Frozen):
    parent: str
    child: str


class LineageGraph(_Frozen):
    """A piece of the lineage DAG around one session."""

    root: str
    nodes: tuple[LineageNode, ...]
    edges: tuple[LineageEdge, ...]
    truncated: bool = False  # the walk stopped at its node limit: more lineage exists than shown

    def mermaid(self) -> str:
        """The graph as Mermaid ``graph TD`` text; the focus session is highlighted."""
        lines = ["graph TD"]
        for node in self.nodes:
            label = f"{node.id}<br/>{node.op} · {node.length} chunks" + (" · elsewhere" if node.stub else "")
            lines.append(f'    {node.id}["{label}"]')
        for edge in self.edges:
            lines.append(f"    {edge.parent} --> {edge.child}")
        lines.append(f"    style {self.root} stroke-width:3px")
        if self.truncated:
            lines.append(f"    %% truncated at {len(self.nodes)} nodes: ask for a smaller depth around one session")
        return "\n".join(lines)
