"""Identifiers: a prefix, then a time-ordered hex body, so ids sort by creation."""

from __future__ import annotations

import os
import re
import time

from runtime.errors import InvalidInputError

_ID = re.compile(r"^[a-z]{3}_[0-9a-f]{24}$")


def new_id(prefix: str) -> str:
    """A new id such as ``ses_0190f3c2a1b4e5f60718293a``: 12 hex digits of milliseconds, 12 random."""
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}{os.urandom(6).hex()}"


def is_id(value: str, prefix: str) -> bool:
    """True when ``value`` is shaped like an id with this prefix."""
    return value.startswith(prefix + "_") and bool(_ID.match(value))


def now() -> float:
    """Wall-clock seconds since the epoch; the one clock records use."""
    return time.time()


MAX_ID_SEARCH = 1000
MAX_ID_PREFIX = 100  # no id is that long


def check_id_search(prefix: str, limit: int) -> None:
    """Refuse a malformed search for ids by prefix (what completion asks for)."""
    if not isinstance(prefix, str) or len(prefix) > MAX_ID_PREFIX:
        raise InvalidInputError(f"prefix must be text of at most {MAX_ID_PREFIX} characters, such as 'ses_01a2'")
    if not isinstance(limit, int) or not 1 <= limit <= MAX_ID_SEARCH:
        raise InvalidInputError(f"limit must be a whole number from 1 to {MAX_ID_SEARCH} (got {limit!r})")
