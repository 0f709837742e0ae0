"""When a schedule's ticks fall: a cron expression read by ``croniter``, in a time zone read by ``zoneinfo``.

croniter walks wall-clock times; turning each into an instant is done here, so that daylight saving
time is handled one way on every platform: a wall-clock time the zone skips (spring forward) fires
nothing, one it repeats (fall back) fires once, at its first occurrence (``fold=0``). A tick is a
UNIX time (seconds, UTC): what the store keys a tick by.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from runtime.errors import InvalidInputError

#: Walking this many wall-clock candidates without finding one that exists means the expression has none.
_MAX_STEPS = 10_000


def check_cron(cron: object) -> str:
    """``cron`` if it is a standard five-field expression (or an ``@hourly``-style alias) croniter reads."""
    if not isinstance(cron, str) or not cron.strip():
        raise InvalidInputError(f"cron must be a cron expression such as '0 * * * *', got {cron!r}")
    expr = " ".join(cron.split())
    fields = expr.split(" ")
    if not (len(fields) == 5 or (len(fields) == 1 and expr.startswith("@"))) or not croniter.is_valid(expr):
        raise InvalidInputError(
            f"cron {cron!r} is not a valid cron expression: "
            "five fields (minute hour day month weekday), e.g. '0 * * * *'"
        )
    return expr


def check_timezone(timezone: object) -> ZoneInfo:
    """The zone named ``timezone`` (an IANA name such as ``Europe/Paris``)."""
    if not isinstance(timezone, str) or not timezone:
        raise InvalidInputError(f"timezone must be an IANA time zone name such as 'Europe/Paris', got {timezone!r}")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInputError(
            f"unknown time zone {timezone!r}: use an IANA name such as 'UTC' or 'Europe/Paris'"
        ) from None


def _instant(wall: datetime, zone: ZoneInfo) -> float | None:
    """The instant of a naive wall-clock time in ``zone`` (its first occurrence), or None if the zone skips it."""
    aware = wall.replace(tzinfo=zone, fold=0)
    back = aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
    return None if back != wall else aware.timestamp()


def ticks_after(cron: str, timezone: str, after: float) -> Iterator[float]:
    """The ticks strictly after ``after``, in order (endless for any valid expression)."""
    zone = check_timezone(timezone)
    # Start a minute back from the wall-clock time of ``after``: in a repeated hour, the wall clock of
    # ``after`` may be its second pass, whose ticks (kept at their first occurrence) lie before it.
    start = datetime.fromtimestamp(after, zone).replace(tzinfo=None, fold=0)
    walk = croniter(cron, start.replace(second=0, microsecond=0), ret_type=datetime)
    last = after
    misses = 0
    while misses < _MAX_STEPS:
        wall = walk.get_next(datetime)
        at = _instant(wall, zone)
        if at is None or at <= last:
            misses += 1
            continue
        misses = 0
        last = at
        yield at
    raise InvalidInputError(f"cron {cron!r} has no time that exists in {timezone}")


def next_tick(cron: str, timezone: str, after: float) -> float:
    """The first tick strictly after ``after``."""
    return next(ticks_after(cron, timezone, after))


def due_ticks(cron: str, timezone: str, first: float, until: float, limit: int) -> list[float]:
    """The ticks from ``first`` (itself a tick) up to ``until`` inclusive, at most ``limit`` (the latest ones)."""
    found: list[float] = []
    if first > until:
        return found
    found.append(first)
    for at in ticks_after(cron, timezone, first):
        if at > until:
            break
        found.append(at)
        if len(found) > limit:
            found.pop(0)
    return found
