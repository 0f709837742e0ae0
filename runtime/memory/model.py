"""Memory values (items, hits, commit results) and the ``memory://`` URI rules.

A memory URI is ``memory://{scope}/{path}``: ``scope`` is one of ``user`` (facts about the user),
``agent`` (what agents learned), ``session`` (archived conversations and what was extracted from
them) or ``resources`` (documents); ``path`` is one or more ``/``-separated segments.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime.errors import InvalidInputError

SCOPES: tuple[str, ...] = ("user", "agent", "session", "resources")
PREFIX = "memory://"
MAX_PATH_CHARS = 512
MAX_CONTENT_CHARS = 200_000
MAX_TAGS = 32
MAX_TAG_CHARS = 64

# A path segment: no separators, whitespace or characters that mean something in a URI.
_SEGMENT = re.compile(r"^[^\s/?#%\\\"<>|*\x00-\x1f\x7f]+$")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MemoryItem(_Frozen):
    """One remembered piece of text, addressed by a ``memory://`` URI."""

    id: str
    uri: str
    scope: str
    content: str
    tags: tuple[str, ...] = ()
    source: str | None = None
    created_at: float
    updated_at: float
    tenant: str
    project: str

    @classmethod
    def from_row(cls, row: Any) -> MemoryItem:
        """From a ``memory_items`` row (a mapping by column name; ``tags`` stored as a JSON list)."""
        return cls(
            id=row["id"],
            uri=row["uri"],
            scope=row["scope"],
            content=row["content"],
            tags=tuple(json.loads(row["tags"])),
            source=row["source"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            tenant=row["tenant"],
            project=row["project"],
        )

    def public(self) -> dict[str, Any]:
        """The item as plain JSON."""
        return self.model_dump(mode="json")


class MemoryHit(_Frozen):
    """A recall result: which item, how well it matched (always > 0: BM25, cosine or fused), where, and by what."""

    memory_id: str
    uri: str
    score: float
    snippet: str
    tags: tuple[str, ...] = ()
    source: str | None = None
    match: str = "keyword"  # keyword, semantic or both (CONTRACT §13)

    def public(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class CommitResult(_Frozen):
    """What ``commit`` wrote: the archived transcript and the items extracted from it."""

    archived_uri: str
    extracted_count: int
    items: tuple[MemoryItem, ...] = ()
    superseded: tuple[str, ...] = ()  # transcripts of earlier snapshots that left the search index

    def public(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def check_scope(scope: str) -> str:
    if scope not in SCOPES:
        raise InvalidInputError(f"memory scope {scope!r} is not one of {', '.join(SCOPES)}; pick one of them")
    return scope


def check_path(path: str) -> str:
    """A valid path (segments joined by ``/``) or an InvalidInputError saying what to change."""
    if not path or len(path) > MAX_PATH_CHARS:
        raise InvalidInputError(f"memory path must be 1 to {MAX_PATH_CHARS} characters, like 'prefs/editor'")
    for segment in path.split("/"):
        if segment == "":
            raise InvalidInputError(
                f"memory path {path!r} has an empty segment (a leading, trailing or doubled '/'); remove it"
            )
        if segment in (".", ".."):
            raise InvalidInputError(f"memory path {path!r} may not contain '.' or '..' segments; use plain names")
        if not _SEGMENT.match(segment):
            raise InvalidInputError(
                f'memory path segment {segment!r} has whitespace, control or reserved characters (?#%\\"<>|*); '
                "use letters, digits, '-', '_', '.' or ':'"
            )
    return path


def make_uri(scope: str, path: str) -> str:
    return f"{PREFIX}{check_scope(scope)}/{check_path(path)}"


def parse_uri(uri: str) -> tuple[str, str]:
    """``(scope, path)`` of a full memory URI, validated."""
    if not isinstance(uri, str) or not uri.startswith(PREFIX):
        raise InvalidInputError(f"memory URI {uri!r} must start with {PREFIX!r}, like 'memory://user/prefs/editor'")
    scope, _, path = uri[len(PREFIX) :].partition("/")
    check_scope(scope)
    return scope, check_path(path)


def check_prefix(prefix: str) -> str:
    """A listing prefix: ``memory://``, optionally followed by a scope and the start of a path."""
    if not isinstance(prefix, str) or not prefix.startswith(PREFIX):
        raise InvalidInputError(f"memory prefix {prefix!r} must start with {PREFIX!r}, like 'memory://user/'")
    rest = prefix[len(PREFIX) :]
    if rest:
        scope, sep, _ = rest.partition("/")
        if sep or not any(s.startswith(scope) for s in SCOPES):  # a whole scope, or a start of none
            check_scope(scope)
    return prefix


def check_tags(tags: Any) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str):
        raise InvalidInputError("tags must be a list of strings, not one string; wrap it: [tag]")
    out = tuple(dict.fromkeys(tags))
    if len(out) > MAX_TAGS:
        raise InvalidInputError(f"at most {MAX_TAGS} tags per item (got {len(out)}); keep the important ones")
    for tag in out:
        if not isinstance(tag, str) or not tag.strip() or len(tag) > MAX_TAG_CHARS:
            raise InvalidInputError(f"tag {tag!r} must be a non-empty string of at most {MAX_TAG_CHARS} characters")
    return out


def check_content(content: Any) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidInputError("memory content must be non-empty text")
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidInputError(
            f"memory content is {len(content)} characters; the limit is {MAX_CONTENT_CHARS}: "
            "split it into several items"
        )
    return content
