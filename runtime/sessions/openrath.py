"""Sessions saved by OpenRath 2.0.0 (``rath.session.persistence``), read and imported as sessions here.

OpenRath writes one JSONL file per session (``~/.openrath/sessions/<uuid>.jsonl``)::

    {"record_type": "header", "schema_version": 1, "id": UUID, "created_at": ISO-8601,
     "parent_session_ids": [UUID...], "lineage_operator": "Session.fork", "lineage_kind": "op_fork",
     "lineage_extras": [...], "sandbox_backend": ..., "sandbox_spec": ..., "sandbox_handle_id": ...}
    {"record_type": "chunk", "index": 0, "kind": "system|user|assistant|tool_result", "payload": {...}}
    {"record_type": "trailer", "closed_at": ISO-8601, "final_chunk_count": N, "cumulative_usage": {...}|null}

(no trailer: the session was not closed cleanly, e.g. its process died). Payloads: ``{"content"}`` for
system and user, ``{"content", "tool_calls"}`` (OpenAI-shaped) for assistant, ``{"tool_call_id",
"name", "content"}`` for tool_result. A fork holds its whole transcript, its parent's included.

Import keeps the chunks (kinds, content, tool calls), the usage and the parents: each OpenRath id
becomes a session id of its own (``ses_`` and 24 hex digits of a hash of it: importing a file again
finds the same session), a parent already here is linked as the session's parent (one not here yet is
a lineage stub, filled in when its file is imported), and the chunks a fork shares with its parent
keep the parent's chunk identities, so a later merge knows them. Every imported chunk is
``trust: external``: it was written elsewhere. The OpenRath header is kept in ``metadata.openrath``.
A line that is not what OpenRath writes is an error naming the line, and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import ValidationError

from runtime.errors import ConflictError, InvalidInputError, NotFoundError
from runtime.sessions.jsonl import json_lines
from runtime.sessions.merge import total_usage
from runtime.sessions.model import Chunk, LineageNode, Placement, SessionInfo, ToolCall, Usage
from runtime.sessions.store import NewSession, StoredChunk

if TYPE_CHECKING:
    from runtime.sessions.store import SessionStore

SCHEMA_VERSION = 1
KINDS = ("system", "user", "assistant", "tool_result")


@dataclass(frozen=True)
class OpenRathSession:
    """One OpenRath session file, checked."""

    openrath_id: str
    created_at: float
    parents: tuple[str, ...]  # OpenRath ids
    header: dict[str, Any]
    chunks: tuple[Chunk, ...]
    usage: Usage
    closed: bool

    @property
    def session_id(self) -> str:
        return session_id_of(self.openrath_id)


def session_id_of(openrath_id: str) -> str:
    """The session id an OpenRath session is imported under (the same every time)."""
    return "ses_" + hashlib.sha256(f"openrath:{openrath_id}".encode()).hexdigest()[:24]


def _uid(openrath_id: str, index: int) -> str:
    return hashlib.sha256(f"openrath:{openrath_id}:{index}".encode()).hexdigest()[:16]


def is_openrath(text: str) -> bool:
    """Whether ``text`` starts with an OpenRath session header (its first non-blank line)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        row = json.loads(first)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser: the JSONL reader names it
        return False
    return isinstance(row, dict) and row.get("record_type") == "header" and "schema_version" in row


class _Lines:
    """Errors that name the source and the line."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, line_no: int, what: str) -> InvalidInputError:
        return InvalidInputError(f"{self.source} line {line_no}: {what} (not an OpenRath 2.0.0 session file)")


def parse(text: str, source: str = "the JSONL") -> OpenRathSession:
    """Read and check a whole OpenRath session file; ``InvalidInputError`` names the first bad line."""
    lines = _Lines(source)
    rows = json_lines(text, lines.fail, "record_type")
    if not rows:
        raise InvalidInputError(f"{source} is empty: an OpenRath session file starts with its header line")
    line_no, header = rows[0]
    openrath_id, created_at, parents = _header(lines, line_no, header)
    chunks: list[Chunk] = []
    usage, closed = Usage(), False
    for line_no, row in rows[1:]:
        kind = row["record_type"]
        if closed:
            raise lines.fail(line_no, "a line after the trailer (the trailer closes the session)")
        if kind == "chunk":
            chunks.append(_chunk(lines, line_no, row, len(chunks)))
        elif kind == "trailer":
            usage = _trailer(lines, line_no, row, len(chunks))
            closed = True
        else:
            raise lines.fail(line_no, f"unknown record_type {kind!r} (expected 'chunk' or 'trailer')")
    return OpenRathSession(openrath_id, created_at, parents, header, tuple(chunks), usage, closed)


def _header(lines: _Lines, line_no: int, row: dict[str, Any]) -> tuple[str, float, tuple[str, ...]]:
    if row.get("record_type") != "header":
        raise lines.fail(line_no, "the first line must be the header (record_type 'header')")
    if row.get("schema_version") != SCHEMA_VERSION:
        found = row.get("schema_version")
        raise lines.fail(line_no, f"schema_version {found!r}: this reads version {SCHEMA_VERSION} (OpenRath 2.0.0)")
    try:
        openrath_id = str(UUID(str(row.get("id"))))
        parents = tuple(str(UUID(str(p))) for p in row.get("parent_session_ids") or [])
    except ValueError:
        raise lines.fail(line_no, "'id' and 'parent_session_ids' must be UUIDs") from None
    try:
        created_at = datetime.fromisoformat(str(row.get("created_at"))).timestamp()
    except ValueError:
        raise lines.fail(line_no, f"created_at {row.get('created_at')!r} is not an ISO-8601 time") from None
    if openrath_id in parents:
        raise lines.fail(line_no, f"session {openrath_id} names itself as its parent")
    return openrath_id, created_at, parents


def _chunk(lines: _Lines, line_no: int, row: dict[str, Any], expected: int) -> Chunk:
    if row.get("index") != expected:
        raise lines.fail(line_no, f"chunk index {row.get('index')!r} where {expected} comes next (a line is missing?)")
    kind, payload = row.get("kind"), row.get("payload")
    if kind not in KINDS:
        raise lines.fail(line_no, f"chunk kind {kind!r} is not one of {list(KINDS)}")
    if not isinstance(payload, dict):
        raise lines.fail(line_no, "a chunk's 'payload' must be an object")
    content = payload.get("content")
    if not isinstance(content, str) and not (kind == "assistant" and content is None):
        raise lines.fail(line_no, f"a {kind} chunk's payload needs its 'content' text")
    fields: dict[str, Any] = {"kind": kind, "content": content or "", "trust": "external"}
    try:
        if kind == "assistant" and payload.get("tool_calls"):
            fields["tool_calls"] = tuple(ToolCall.model_validate(tc) for tc in payload["tool_calls"])
        if kind == "tool_result":
            fields["tool_call_id"], fields["name"] = payload.get("tool_call_id"), payload.get("name")
            if not isinstance(fields["tool_call_id"], str):
                raise lines.fail(line_no, "a tool_result chunk's payload needs its 'tool_call_id'")
        return Chunk.model_validate(fields)
    except (ValidationError, TypeError) as exc:
        brief = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise lines.fail(line_no, f"a {kind} chunk does not read as one: {brief}") from None


def _trailer(lines: _Lines, line_no: int, row: dict[str, Any], count: int) -> Usage:
    if row.get("final_chunk_count") != count:
        raise lines.fail(
            line_no, f"the trailer counts {row.get('final_chunk_count')!r} chunks but the file holds {count}"
        )
    raw = row.get("cumulative_usage")
    if raw is None:
        return Usage()
    try:
        return Usage.model_validate(raw)
    except ValidationError as exc:
        raise lines.fail(line_no, f"cumulative_usage: {exc.errors()[0]['msg']}") from None


async def import_openrath(store: SessionStore, doc: OpenRathSession) -> SessionInfo:
    """Write ``doc`` as session ``doc.session_id`` (op ``import``), in one transaction; again: a no-op."""
    target = doc.session_id
    parents = tuple(session_id_of(p) for p in doc.parents)
    known = await store.ancestry(list(parents)) if parents else {}
    uids = [_uid(doc.openrath_id, i) for i in range(len(doc.chunks))]
    for parent in parents[:1]:  # a fork shares its parent's transcript: the shared part keeps its identity
        if parent in known:
            uids = await _shared_uids(store, parent, doc.chunks, uids)
    chunks = tuple(StoredChunk(uid, chunk) for uid, chunk in zip(uids, doc.chunks, strict=True))
    try:
        current, same = await store.snapshot(target)
    except NotFoundError:
        pass  # new here, or a stub a child's import left: filled in now
    else:
        if [sc.chunk for sc in same] == list(doc.chunks):
            return current
        raise ConflictError(
            f"OpenRath session {doc.openrath_id} was imported before ({target}) with other chunks; "
            "a file that changed since is imported into another home"
        )
    meta = {key: doc.header.get(key) for key in ("id", "created_at", "lineage_operator", "lineage_kind")}
    meta.update(parents=list(doc.parents), closed=doc.closed, sandbox_backend=doc.header.get("sandbox_backend"))
    stubs = [
        (LineageNode(id=p, op="import", length=0, created_at=doc.created_at, stub=True), ())
        for p in parents
        if p not in known
    ]
    new = NewSession(
        op="import",
        parents=parents,
        chunks=chunks,
        placement=Placement(),
        usage=doc.usage,
        metadata={"openrath": meta},
        id=target,
        created_at=doc.created_at,
        own_usage=doc.usage.minus(total_usage(known.values())),
    )
    (info,) = await store.insert([new], stubs=stubs)
    return info


async def _shared_uids(store: SessionStore, parent: str, chunks: tuple[Chunk, ...], uids: list[str]) -> list[str]:
    """``uids`` with the parent's own where the child's chunks begin as the parent's do."""
    try:
        theirs = await store.chunks(parent, 0, len(chunks))
    except NotFoundError:  # a stub: its chunks are not here yet
        return uids
    out = list(uids)
    for index, stored in enumerate(theirs):
        if stored.chunk != chunks[index]:
            break
        out[index] = stored.uid
    return out
