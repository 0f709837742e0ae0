"""Memory tools: remember, recall (keyword, semantic or hybrid; best first, score > 0), list, commit, forget."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server import MCPServer
from pydantic import Field

from rath_mcp.errors import translate_tool
from rath_mcp.models import WireModel
from rath_mcp.tools.arguments import (
    QUERY_CHARS,
    URI_CHARS,
    MemoryCursor,
    MemoryId,
    MemoryPath,
    RecallMode,
    SessionId,
    Tags,
    Text,
)
from rath_mcp.tools.sessions import READ_ONLY, WRITES
from runtime import InvalidInputError, Runtime

Scope = Literal["user", "agent", "session", "resources"]
Mode = Literal["keyword", "semantic", "hybrid"]
Match = Literal["keyword", "semantic", "both"]
PREVIEW_CHARS = 200


class Remembered(WireModel):
    memory_id: str
    uri: str
    scope: str
    tags: list[str]


class Hit(WireModel):
    memory_id: str
    uri: str
    score: float = Field(
        description="always > 0, higher is better: BM25 (keyword), cosine (semantic) or the fused rank score (hybrid)"
    )
    match: Match = Field(description="what found it: the words (keyword), the meaning (semantic), or both")
    snippet: str
    tags: list[str]
    source: str | None


class Recall(WireModel):
    query: str
    mode: Mode
    hits: list[Hit] = Field(description="best first; in keyword mode only items sharing a word with the query")


class Listed(WireModel):
    memory_id: str
    uri: str
    preview: str = Field(description=f"the first {PREVIEW_CHARS} characters of the content")
    tags: list[str]
    updated_at: float


class Child(WireModel):
    prefix: str = Field(description="a prefix one level down; pass it as prefix to list what is under it")
    count: int = Field(description="items under it, at any depth")


class Tree(WireModel):
    prefix: str
    items: list[Listed] = Field(description="the items directly under the prefix, in URI order")
    children: list[Child] = Field(description="the prefixes one level down, with their item counts")
    next_cursor: str | None = Field(description="pass it as cursor for the next page; null at the end")


class Committed(WireModel):
    session_id: str
    archived_uri: str
    extracted_count: int
    extracted_uris: list[str]


class Forgotten(WireModel):
    deleted: int = Field(description="how many items were deleted (0 when there was nothing to forget)")


def register(server: MCPServer, rt: Runtime) -> None:
    """Add the memory tools to ``server``, bound to ``rt.memory``."""

    @server.tool(annotations=WRITES)
    @translate_tool
    async def memory_remember(
        content: Annotated[Text, Field(description="the text to remember")],
        scope: Scope = "user",
        path: MemoryPath = None,
        tags: Tags = None,
    ) -> Remembered:
        """Remember a piece of text at memory://{scope}/{path}; it is searchable at once."""
        item = await rt.memory.remember(content, scope=scope, path=path, tags=tags or ())
        return Remembered(memory_id=item.id, uri=item.uri, scope=item.scope, tags=list(item.tags))

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def memory_recall(
        query: Annotated[str, Field(max_length=QUERY_CHARS, description="the words to look for")],
        k: Annotated[int, Field(ge=1, le=100)] = 5,
        scope: Scope | None = None,
        mode: RecallMode = None,
    ) -> Recall:
        """Find the remembered items that best match a query, best first: by its words (keyword, BM25), its
        meaning (semantic, embeddings), or both fused (hybrid: the default when the server has an embedder)."""
        chosen = mode or ("keyword" if rt.memory.semantic is None else "hybrid")
        hits = await rt.memory.recall(query, k=k, scope=scope, mode=chosen)
        return Recall(
            query=query,
            mode=chosen,
            hits=[
                Hit(
                    memory_id=h.memory_id,
                    uri=h.uri,
                    score=h.score,
                    match=h.match,  # type: ignore[arg-type]  # the service says only these three
                    snippet=h.snippet,
                    tags=list(h.tags),
                    source=h.source,
                )
                for h in hits
            ],
        )

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def memory_list(
        prefix: Annotated[
            str, Field(max_length=URI_CHARS, description="memory://, a scope (memory://user/) or a folder in it")
        ] = "memory://",
        cursor: MemoryCursor = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
    ) -> Tree:
        """Browse remembered items as a tree: what lies directly under a URI prefix, and sub-prefixes with counts."""
        items, children, after = await rt.memory.browse(prefix, cursor=cursor, limit=limit)
        return Tree(
            prefix=prefix,
            items=[
                Listed(
                    memory_id=i.id,
                    uri=i.uri,
                    preview=i.content[:PREVIEW_CHARS],
                    tags=list(i.tags),
                    updated_at=i.updated_at,
                )
                for i in items
            ],
            children=[Child(prefix=p, count=n) for p, n in children],
            next_cursor=after,
        )

    @server.tool(annotations=WRITES)
    @translate_tool
    async def memory_commit(session_id: SessionId, scope: Scope = "session") -> Committed:
        """Archive a session's transcript in memory and remember the facts picked out of it."""
        result = await rt.memory.commit(session_id, scope=scope)
        return Committed(
            session_id=session_id,
            archived_uri=result.archived_uri,
            extracted_count=result.extracted_count,
            extracted_uris=[i.uri for i in result.items],
        )

    @server.tool(annotations=WRITES)
    @translate_tool
    async def memory_forget(
        memory_id: MemoryId = None,
        uri: Annotated[str | None, Field(max_length=URI_CHARS, description="memory://{scope}/{path}")] = None,
    ) -> Forgotten:
        """Delete one remembered item, by memory_id or by uri (give exactly one)."""
        if (memory_id is None) == (uri is None):
            raise InvalidInputError("memory_forget needs exactly one of memory_id or uri")
        return Forgotten(deleted=await rt.memory.forget(memory_id=memory_id, uri=uri))
