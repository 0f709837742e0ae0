"""What the PostgreSQL outage tests share: a workflow whose first step waits, after an effect, on an
event the test sets, and a way to wait for what the runtime logs about itself."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import anyio

from runtime import StepContext, Workflow, step


class Paying(Workflow):
    """Two steps with an effect each; the first waits, after its effect, on an event the test sets."""

    name = "paying"

    def __init__(self) -> None:
        self.applied: list[tuple[str, str]] = []
        self.holding, self.release, self.second = anyio.Event(), anyio.Event(), anyio.Event()

    async def _apply(self, run_id: str, what: str) -> str:
        self.applied.append((run_id, what))
        return what

    @step(entry=True, successors=["ship"])
    async def pay(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        paid = await ctx.effect("pay", partial(self._apply, ctx.run_id, "paid"))
        self.holding.set()
        await self.release.wait()  # the step ends, and its commit is tried, while the database is away
        return {**state, "paid": paid}

    @step()
    async def ship(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        self.second.set()
        return {**state, "shipped": await ctx.effect("ship", partial(self._apply, ctx.run_id, "shipped"))}


class Heard(logging.Handler):
    """An event per text, set when the runtime logs a record whose message holds that text."""

    def __init__(self, *texts: str) -> None:
        super().__init__(logging.INFO)
        self.events = {text: anyio.Event() for text in texts}
        self.any = anyio.Event()  # one of them was heard

    def emit(self, record: logging.LogRecord) -> None:
        for text, event in self.events.items():
            if text in record.getMessage():
                event.set()
                self.any.set()

    def __getitem__(self, text: str) -> anyio.Event:
        return self.events[text]


@contextmanager
def hearing(*texts: str) -> Iterator[Heard]:
    """Listen to the runtime's log (INFO and up) for ``texts`` while the block runs."""
    heard, logger = Heard(*texts), logging.getLogger("runtime")
    level = logger.level
    logger.addHandler(heard)
    logger.setLevel(logging.INFO)
    try:
        yield heard
    finally:
        logger.removeHandler(heard)
        logger.setLevel(level)
