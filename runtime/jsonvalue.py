"""The one check a value passes before it is stored as JSON (run input, decisions, metadata, …).

Standard JSON has no NaN or Infinity, and Python's ``json`` writes them anyway (as bare ``NaN``,
which other readers refuse); a string holding a lone UTF-16 surrogate cannot be encoded as UTF-8
at all; and JSON nested very deep is refused by the MCP SDK's parser (pydantic's, at 200 levels),
so a value stored that deep could be written but never read back over the protocol. Each is
refused here with the path where it was found, by a walk that never recurses (so a value nested
100 000 deep is reported, not a ``RecursionError``).
"""

from __future__ import annotations

import math
from typing import Any

from runtime.errors import InvalidInputError

#: Deepest nesting of objects and arrays a stored value may have. Results wrap a stored value in a
#: few more levels (result, structuredContent, …) and the SDK's parser stops at 200, so stay well under.
MAX_DEPTH = 64
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


#: Where a part of a value sits: ``None`` for the value itself, else ``(where its container sits, its key
#: or index)``. Paths are written out only for the part that has a problem, not for every part walked.
_Where = tuple[Any, str | int] | None


def problem(value: Any, *, max_depth: int = MAX_DEPTH, int64: bool = False) -> tuple[str, str] | None:
    """``(path, what is wrong)`` for the first part of ``value`` that JSON cannot carry, else ``None``.

    The path is written as ``.key`` and ``[index]`` steps from the top (empty for the value itself).
    ``int64``: integers must also fit SQLite's 64-bit INTEGER (for values whose numbers become columns).
    """
    stack: list[tuple[Any, _Where, int]] = [(value, None, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            if not _is_unicode(item):
                why = "holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape), which is not text"
                return _path(where), why
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if int64 and not INT64_MIN <= item <= INT64_MAX:
                return _path(where), "is an integer beyond 64 bits; use one from -2**63 to 2**63-1"
        elif isinstance(item, float):
            if not math.isfinite(item):
                why = f"is {item!r}, which JSON cannot carry (no NaN or Infinity); send a finite number or null"
                return _path(where), why
        elif isinstance(item, dict | list | tuple):
            if depth >= max_depth:
                return _path(where), f"is nested deeper than {max_depth} levels of objects and arrays; flatten it"
            if isinstance(item, dict):
                for key, sub in item.items():
                    if not isinstance(key, str):
                        return _path(where), f"has a key that is not a string ({key!r}); keys must be strings"
                    if not _is_unicode(key):
                        return _path(where), "has a key holding a lone UTF-16 surrogate, which is not text"
                    stack.append((sub, (where, key), depth + 1))
            else:
                stack.extend((sub, (where, i), depth + 1) for i, sub in enumerate(item))
        else:
            kind = type(item).__name__
            return _path(where), f"is a {kind}, which is not plain JSON (str, number, bool, null, list, dict)"
    return None


def _path(where: _Where) -> str:
    """``where`` written out: ``.key`` for an identifier key, ``['key']`` for another key, ``[i]`` for an index."""
    steps: list[str] = []
    while where is not None:
        where, key = where
        if isinstance(key, int):
            steps.append(f"[{key}]")
        else:
            steps.append(f".{key}" if key.isidentifier() else f"[{key!r}]")
    return "".join(reversed(steps))


def shorten(path: str, limit: int = 60) -> str:
    """A path cut in the middle when long (a value nested 5 000 deep has a 10 000-character path)."""
    return path if len(path) <= limit else f"{path[: limit // 2]}…{path[-limit // 2 :]}"


def check_json(value: Any, what: str, *, max_depth: int = MAX_DEPTH) -> None:
    """Raise ``InvalidInputError`` naming ``what`` (and the path inside it) unless JSON can carry ``value``."""
    found = problem(value, max_depth=max_depth)
    if found is not None:
        path, why = found
        raise InvalidInputError(f"{what}{shorten(path)} {why}")


def _is_unicode(text: str) -> bool:
    if text.isascii():  # the common case, checked without encoding
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
