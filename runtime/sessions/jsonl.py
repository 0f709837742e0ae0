"""The JSONL exchange format of a session.

One JSON object per line::

    {"type": "session", "format": "rath-session/1", "id": ..., "parents": [...], "op": ...,
     "placement": {...}, "usage": {...}, "metadata": {...}, "created_at": ..., "length": N}
    {"type": "chunk", "uid": ..., "kind": ..., "content": ..., "tool_calls"?: [...], ...}   (N lines)
    {"type": "ancestor", "id": ..., "parents": [...], "op": ..., "length": ..., "created_at": ...}

Chunks keep their identity (``uid``) so a later merge still recognises shared history; ancestors
carry lineage only (no content), so the DAG survives the trip.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from runtime.errors import InvalidInputError
from runtime.ids import is_id
from runtime.jsonvalue import MAX_DEPTH, problem, shorten
from runtime.sessions.model import Chunk, LineageNode, SessionInfo
from runtime.sessions.store import StoredChunk

FORMAT = "rath-session/1"


@dataclass(frozen=True)
class Document:
    header: SessionInfo
    chunks: list[StoredChunk]
    ancestors: list[tuple[LineageNode, tuple[str, ...]]]


def dump(info: SessionInfo, chunks: list[StoredChunk], ancestors: list[tuple[LineageNode, tuple[str, ...]]]) -> str:
    lines = [header_line(info), *chunk_lines(chunks), *(ancestor_line(node, parents) for node, parents in ancestors)]
    return "".join(lines)


def header_line(info: SessionInfo) -> str:
    header = {"type": "session", "format": FORMAT, **info.model_dump(mode="json", exclude={"tenant", "project"})}
    return json.dumps(header, ensure_ascii=False, sort_keys=True) + "\n"


def chunk_lines(chunks: Iterable[StoredChunk]) -> list[str]:
    return [
        json.dumps({"type": "chunk", "uid": sc.uid, **sc.chunk.public()}, ensure_ascii=False) + "\n" for sc in chunks
    ]


def ancestor_line(node: LineageNode, parents: tuple[str, ...]) -> str:
    row = {"type": "ancestor", "parents": list(parents), **node.model_dump(mode="json", exclude={"stub"})}
    return json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n"


def _fail(line_no: int, what: str) -> InvalidInputError:
    return InvalidInputError(
        f"line {line_no} of the JSONL: {what}. Pass the text `session_export` produced, unchanged "
        f"(first line type 'session' with format {FORMAT!r}, then its chunks, then its ancestors)."
    )


def json_lines(text: str, fail: Callable[[int, str], InvalidInputError], tag: str) -> list[tuple[int, dict[str, Any]]]:
    """The non-blank lines of ``text`` with their numbers (from 1), each a JSON object with a string ``tag``
    that the store can keep; the first line that is not raises ``fail(line number, what is wrong)``.

    Read by the session_export format here and by OpenRath's (``runtime.sessions.openrath``).
    """
    rows: list[tuple[int, dict[str, Any]]] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise fail(line_no, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        except (RecursionError, ValueError):  # nested past the parser's depth, an integer of 4300+ digits
            raise fail(line_no, f"not JSON this store can keep (nested deeper than {MAX_DEPTH} levels?)") from None
        if not isinstance(row, dict) or not isinstance(row.get(tag), str):
            raise fail(line_no, f"each line must be a JSON object with a {tag!r}")
        found = problem(row, int64=True)
        if found is not None:
            raise fail(line_no, f"the value at {shorten(found[0]) or 'the top'} {found[1]}")
        rows.append((line_no, row))
    return rows


def parse(text: str) -> Document:
    """Parse and fully validate an export; raises ``InvalidInputError`` naming the bad line."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError("the JSONL is empty; pass the text that session_export returned")
    rows = json_lines(text, _fail, "type")
    line_no, first = rows[0]
    if first.get("type") != "session" or first.get("format") != FORMAT:
        raise _fail(
            line_no,
            f"the first line must be the session header with format {FORMAT!r} (or, for a session OpenRath "
            "2.0.0 saved, its header with record_type 'header' and schema_version 1)",
        )
    body = {k: v for k, v in first.items() if k not in ("type", "format")}
    try:
        header = SessionInfo.model_validate(body)
    except ValidationError as exc:
        raise _fail(line_no, f"bad session header: {_brief(exc)}") from None
    _check_ids(line_no, [header.id, *header.parents])
    _check_header(line_no, header)
    chunks: list[StoredChunk] = []
    ancestors: list[tuple[LineageNode, tuple[str, ...]]] = []
    for line_no, row in rows[1:]:
        kind = row.pop("type")
        try:
            if kind == "chunk":
                if ancestors:
                    raise _fail(line_no, "chunk lines must come before ancestor lines")
                uid = row.pop("uid", None)
                if not isinstance(uid, str) or not uid:
                    raise _fail(line_no, "a chunk needs its 'uid'")
                chunks.append(StoredChunk(uid, Chunk.model_validate(row)))
            elif kind == "ancestor":
                parents = row.pop("parents", [])
                if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
                    raise _fail(line_no, "an ancestor's 'parents' must be a list of ids")
                node = LineageNode.model_validate(row)
                _check_ids(line_no, [node.id, *parents])
                if node.id in parents:
                    raise _fail(line_no, f"ancestor {node.id} names itself as its parent")
                ancestors.append((node, tuple(parents)))
            else:
                raise _fail(line_no, f"unknown line type {kind!r} (expected 'chunk' or 'ancestor')")
        except ValidationError as exc:
            raise _fail(line_no, _brief(exc)) from None
    if len(chunks) != header.length:
        raise InvalidInputError(
            f"the header says {header.length} chunks but the JSONL holds {len(chunks)}; "
            "the export was cut or edited — export the session again"
        )
    return Document(header, chunks, ancestors)


def _check_header(line_no: int, header: SessionInfo) -> None:
    """What the model alone does not say: lineage that is a DAG, and a timestamp that is a time."""
    if header.id in header.parents:
        raise _fail(line_no, f"session {header.id} names itself as its parent; a session's parents come before it")
    if len(set(header.parents)) != len(header.parents):
        raise _fail(line_no, "a parent is listed twice in 'parents'")
    if not 0 <= header.created_at < 1e11:  # seconds since 1970, up to the year 5138
        raise _fail(line_no, f"created_at {header.created_at!r} is not a time (seconds since 1970)")
    if header.length < 0:
        raise _fail(line_no, "length must be zero or more")


def _check_ids(line_no: int, ids: list[str]) -> None:
    bad = [i for i in ids if not is_id(i, "ses")]
    if bad:
        raise _fail(line_no, f"{bad[0]!r} is not a session id (ses_ followed by 24 hex digits)")


def _brief(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())
