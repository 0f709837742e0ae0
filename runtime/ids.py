"""Identifiers: a prefix, then a time-ordered hex body, so ids sort by creation (strictly, within a process)."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable

from runtime.errors import InvalidInputError

_ID = re.compile(r"^[a-z]{3}_[0-9a-f]{24}$")


class _IdClock:
    """Where the last id of this process stood, so that its next one sorts after it.

    Lists are newest first by id, and two ids made in the same millisecond would otherwise order by
    their random half. So an id made in the millisecond of the last one (or earlier: the wall clock
    stepped back) keeps that millisecond and takes a random half a random step above the last one's,
    as ULIDs do: ids of one process sort by creation, and stay unguessable. This is the one piece
    of process-wide state in the runtime, like the clock it reads; a lock keeps it for every thread.
    """

    def __init__(self, wall_ns: Callable[[], int] = time.time_ns) -> None:
        self._wall_ns = wall_ns
        self._lock = threading.Lock()
        self._ms = 0
        self._random = 0

    def next(self) -> tuple[int, int]:
        ms = self._wall_ns() // 1_000_000
        with self._lock:
            if ms > self._ms:
                self._ms, self._random = ms, int.from_bytes(os.urandom(6), "big") >> 1  # room to step up
            else:
                self._random += 1 + int.from_bytes(os.urandom(2), "big")
                if self._random >= _RANDOM_SPAN:  # a millisecond's room used up: borrow the next one
                    self._ms, self._random = self._ms + 1, int.from_bytes(os.urandom(6), "big") >> 1
            return self._ms, self._random


_RANDOM_SPAN = 1 << 48
_CLOCK = _IdClock()


def new_id(prefix: str) -> str:
    """A new id such as ``ses_0190f3c2a1b4e5f60718293a``: 12 hex digits of milliseconds, 12 random; the ids
    one process makes sort in the order it made them."""
    ms, random = _CLOCK.next()
    return f"{prefix}_{ms:012x}{random:012x}"


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
