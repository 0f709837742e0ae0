"""A run's writes through a store outage: wait for the store to come back, then make them again.

A store that cannot be reached (a PostgreSQL server restarting, say) answers a write with
``StoreUnavailableError``, which promises that nothing was written. A write a worker makes under its
lease (a step's commit, an effect's record, an interrupt) is therefore simply made again once the
store answers, on a fresh connection: it is fenced by the run's token, so if another worker took the
run over meanwhile the store refuses it (``LeaseLostError``) and the run stops here, and a write
never lands twice. (A write that may have been applied when its connection dropped is resolved by
the store before it answers, or reported as another error: never as this one.)

Without this, a step that ended while the store was away failed its commit, its worker took that for
a bug in the runtime ("crashed the runner"), and the run sat under a lease nobody renewed until the
lease ran out (30 s by default) and another claim took it over. Now it goes on within ``MAX_PAUSE_S``
of the store's return.

The pauses between tries are outside any shield: a worker shutting down during an outage stops
waiting at once (the step is then done again after a restart, as after a crash).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from runtime.errors import StoreUnavailableError

log = logging.getLogger(__name__)
T = TypeVar("T")

FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 0.5
"""The longest pause between two tries: how long after the store's return a waiting write is made at most."""


class Outage:
    """The pauses of one write waiting out an outage, and what it says of it (once in, once out)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.pause = FIRST_PAUSE_S
        self.started: float | None = None

    async def wait(self, error: StoreUnavailableError) -> None:
        """Pause before the next try (the first pause logs why)."""
        if self.started is None:
            self.started = anyio.current_time()
            log.warning("%s waits for the store to come back: %s", self.what, error)
        await anyio.sleep(self.pause)
        self.pause = min(self.pause * 2, MAX_PAUSE_S)

    def over(self) -> None:
        """The write went through (or was refused by the store itself): say how long it waited."""
        if self.started is not None:
            log.info("%s went on after waiting %.1f s for the store", self.what, anyio.current_time() - self.started)
            self.started = None
            self.pause = FIRST_PAUSE_S


async def once_reachable(call: Callable[[], Awaitable[T]], what: str) -> T:
    """``await call()``, made again after a pause for as long as the store cannot be reached."""
    outage = Outage(what)
    while True:
        try:
            result = await call()
        except StoreUnavailableError as exc:
            await outage.wait(exc)
            continue
        outage.over()
        return result
