"""``Periodic``: a pass made now and again in the background (the schedule ticker's, the webhook sender's,
the artifact GC's), written once.

After each pass the loop waits ``interval_s`` for the next, or less: ``wake()`` (something may be due
now) ends the wait at once, a wake that came during the pass ends the wait after it before it begins
(none is lost), and a pass that returns True (it left more to do: a full batch) is followed by the next
at once. A pass that raises is logged with its traceback and the next comes as usual: a store outage
ends, the loop stays. It runs until cancelled, as a task of the runtime's task group.

``sleep`` is how it waits (``anyio.sleep``); a test gives one that waits for the test's go, so that no
pass depends on the wall clock.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field

import anyio

Pass = Callable[[], Awaitable[bool]]
"""One pass; True when it left more to do at once."""


@dataclass(eq=False)  # one loop is equal to itself only
class Periodic:
    """``failed``: what a pass that raised could not do, for the log line (``log``: its owner's logger).
    ``wait_first``: the first pass comes after one interval, not at once."""

    one_pass: Pass
    interval_s: float
    _: KW_ONLY
    failed: str
    log: logging.Logger
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    wait_first: bool = False
    _woken: bool = field(default=False, init=False)
    _waiting: anyio.CancelScope | None = field(default=None, init=False)

    def wake(self) -> None:
        """Something may be due: the next pass now (after the one under way, if any)."""
        self._woken = True
        if self._waiting is not None:
            self._waiting.cancel()

    async def run(self) -> None:
        """Pass after pass, until cancelled."""
        if self.wait_first:
            await self._wait()
        while True:
            self._woken = False
            try:
                more = await self.one_pass()
            except Exception:
                self.log.exception("%s; trying again", self.failed)
                more = False
            if not more:
                await self._wait()

    async def _wait(self) -> None:
        if self._woken:
            return
        with anyio.CancelScope() as self._waiting:  # wake() cancels it
            await self.sleep(self.interval_s)
        self._waiting = None
