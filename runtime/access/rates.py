"""Rate limits of bearer tokens (``token create --rate R/s --burst N``), counted in the store.

The count is the store's, not a process's: every server on one store reads and moves the same
number, so a token limited to 5/s gets 5/s from the whole fleet, not 5/s from each server. The
number is one column of the token's row (``rate_tat``), kept by the generic cell rate algorithm
(GCRA, the token bucket's equivalent with one stored time instead of a level and a time): each
request moves the token's "theoretical arrival time" ``tat`` on by ``1/rate``; a request is let in
while ``tat - now <= (burst - 1)/rate``. One conditional UPDATE per request does both the check and
the count (``runtime.store.core.access.take_rate``). Each server uses its own clock: servers of one
store should keep their clocks in step (NTP), as leases already ask.

What it costs: a request of a limited token is a small write as well as the token's read; tokens
without a rate pay nothing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from runtime.errors import InvalidInputError

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*$")
_PER_S = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "h": 3600.0, "hour": 3600.0}
MAX_RATE = 100_000.0
MAX_BURST = 1_000_000


@dataclass(frozen=True, slots=True)
class Limit:
    """``rate`` requests a second on average, ``burst`` at once."""

    rate: float
    burst: int

    @property
    def interval_s(self) -> float:
        return 1.0 / self.rate

    @property
    def tolerance_s(self) -> float:
        """How far ahead of now the theoretical arrival time may be and still let a request in."""
        return (self.burst - 1) / self.rate

    def describe(self) -> str:
        """``5/s, burst 10`` (per minute or hour where that reads as a whole number)."""
        per, unit = next(((n, u) for n, u in ((1, "s"), (60, "min"), (3600, "h")) if self.rate * n >= 1), (3600, "h"))
        return f"{self.rate * per:.6g}/{unit}, burst {self.burst}"


def parse_rate(text: str) -> float:
    """``5/s``, ``300/min``, ``1000/h`` (or ``/m``, ``/hour``…) as requests a second; a clear error otherwise."""
    found = _RATE.match(text or "")
    rate = float(found.group(1)) / _PER_S[found.group(2)] if found else 0.0
    if not 0 < rate <= MAX_RATE:
        raise InvalidInputError(
            f"--rate {text!r} is not a rate: give requests per unit time, such as 5/s, 300/min or 1000/h "
            f"(more than 0, at most {MAX_RATE:g}/s)"
        )
    return rate


def limit_of(rate: float | None, burst: int | None) -> Limit | None:
    """The limit a token's ``rate`` and ``burst`` make (None: no rate). Burst defaults to one second's worth."""
    if rate is None:
        return None
    return Limit(rate, burst if burst is not None else max(1, math.ceil(rate)))


def check_burst(burst: int | None, rate: float | None) -> int | None:
    if burst is None:
        return None
    if rate is None:
        raise InvalidInputError("--burst limits nothing without --rate: give both, such as --rate 5/s --burst 10")
    if not isinstance(burst, int) or not 1 <= burst <= MAX_BURST:
        raise InvalidInputError(f"--burst {burst!r} must be a whole number of requests from 1 to {MAX_BURST}")
    return burst
