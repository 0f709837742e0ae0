"""The clock a waiting tool keeps its budget and heartbeats by.

Servers use the event loop's own clock. A test hands ``build_server`` a clock it moves itself, so
"the wait lasts its whole budget" and "a heartbeat every N seconds" are checked by moving time,
not by measuring it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import anyio

T = TypeVar("T")


class WaitClock(Protocol):
    """Monotonic seconds, and a sleep until a point on the same scale."""

    def now(self) -> float: ...

    async def sleep_until(self, when: float) -> None: ...


class LoopClock:
    """The event loop's clock (what ``anyio.move_on_after`` keeps)."""

    def now(self) -> float:
        return anyio.current_time()

    async def sleep_until(self, when: float) -> None:
        await anyio.sleep_until(when)


async def before(clock: WaitClock, deadline: float, work: Callable[[], Awaitable[T]]) -> T | None:
    """``work()``'s result, or None when ``clock`` reaches ``deadline`` first (the work is cancelled)."""
    result: list[T] = []
    async with anyio.create_task_group() as tg:

        async def alarm() -> None:
            await clock.sleep_until(deadline)
            tg.cancel_scope.cancel()

        async def run() -> None:
            result.append(await work())
            tg.cancel_scope.cancel()

        tg.start_soon(alarm)
        tg.start_soon(run)
    return result[0] if result else None
