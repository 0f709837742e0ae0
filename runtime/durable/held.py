"""One run's commits, in order; a chain of read-only steps shares one of them.

A step declared ``none`` or ``read_only`` touches nothing outside its run: after a crash it is simply
run again (``EffectClass``). So when such a step is followed by another such step, the runner need not
wait for the first one's commit (its fsync) before it starts the second: that commit is *held*, and made
by the run's next commit, first, in the same transaction (``RunStore.commit``'s ``held``). A chain of
fast read-only steps pays one fsync for up to ``MAX_HELD`` steps instead of one each: what group commit
gives concurrent runs, given to one run's own steps.

What a crash can lose is only ever held read-only steps, and they are run again. Nothing outside the
run sees a held step before it is committed (readers see committed rows; watchers are told after the
commit). A held step is committed before anything else the run writes (an effect, an interrupt, a
progress note: ``LiveContext`` writes after ``flush``), before a step that is not read-only starts,
when the run ends, and as soon as the run waits for anything: a read-only step that awaits I/O lets a
flush task commit what is held meanwhile, so a slow step never delays its predecessor's commit.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from runtime.durable.outage import Outage
from runtime.durable.store import Claim, EventSpec, HeldStep, RunChange
from runtime.errors import StoreUnavailableError
from runtime.flow.workflow import EffectClass
from runtime.scopes import cancel_scope

log = logging.getLogger(__name__)

#: Steps whose commits may be held: they may run again after a crash, and change nothing outside their run.
CHAINED = frozenset({EffectClass.NONE, EffectClass.READ_ONLY})
#: Held steps at most: what one crash can make a run do again, and what one transaction carries.
MAX_HELD = 8


class CommitLine:
    """A run's commits under its lease, one at a time and in order, each with the steps held before it."""

    def __init__(
        self,
        commit: Callable[..., Awaitable[list[Claim]]],
        committed: Callable[[], None],
        failed: Callable[[], None],
        run_id: str = "",
    ) -> None:
        self._run_id = run_id  # named in what an outage logs
        self._commit = commit  # ``RunStore.commit`` bound to the run and its fencing token
        self._committed = committed  # tells the run's watchers after a flush
        self._failed = failed  # stops the running step when a flush in the background failed
        self._held: list[HeldStep] = []
        self._lock = anyio.Lock()
        self._tg: TaskGroup | None = None
        self._flush_queued = False
        self._error: Exception | None = None

    def attach(self, tg: TaskGroup | None) -> None:
        """Flush in ``tg`` whenever the run waits (``None``: only when asked)."""
        self._tg = tg

    @property
    def holding(self) -> int:
        return len(self._held)

    def raise_error(self) -> None:
        """Raise what a flush in the background failed with (the steps it held are not committed)."""
        if self._error is not None:
            raise self._error

    async def make(self, change: RunChange, events: list[EventSpec], **options: Any) -> list[Claim]:
        """Commit now (every held step first, in the same transaction); what ``RunStore.commit`` returns."""
        return await self._with_held(lambda held: self._commit(change, events, held=held, **options))

    async def hold(self, step: HeldStep) -> None:
        """Hold a read-only step's commit for the next one (made at once when ``MAX_HELD`` are held)."""
        self.raise_error()
        self._held.append(step)
        if len(self._held) >= MAX_HELD:
            await self.flush()
        elif not self._flush_queued and self._tg is not None:
            self._flush_queued = True  # runs once this run waits for anything
            self._tg.start_soon(self._flush_soon)

    async def flush(self) -> None:
        """Commit every held step now (nothing to do when none is held)."""
        if not self._held:
            return self.raise_error()
        await self._with_held(self._commit_last)

    async def _commit_last(self, held: list[HeldStep]) -> list[Claim]:
        """The last held step's commit, carrying the ones before it (nothing when none is held)."""
        if not held:
            return []
        *before, last = held
        await self._commit(last.change, list(last.events), checkpoint=last.checkpoint, held=before)
        self._committed()
        return []

    async def _with_held(self, commit: Callable[[list[HeldStep]], Awaitable[list[Claim]]]) -> list[Claim]:
        """``commit(held)`` of the steps held at this point, alone on the line (the run's commits stay in
        order) and shielded (a commit under way always ends). A background flush's failure is raised first.

        While the store cannot be reached (nothing was written), the steps are held again and the commit
        is made again once it answers (``outage.py``), the pauses unshielded and off the line."""
        outage: Outage | None = None  # made at the first outage: most commits never meet one
        while True:
            with cancel_scope(shield=True):
                try:
                    self._lock.acquire_nowait()  # the common case, without the pass of the loop ``acquire`` makes
                except anyio.WouldBlock:
                    await self._lock.acquire()
                try:
                    self.raise_error()
                    held, self._held = self._held, []
                    try:
                        claims = await commit(held)
                    except StoreUnavailableError as exc:
                        self._held[:0] = held  # not written: held again, before any held meanwhile
                        unavailable = exc
                    else:
                        if outage is not None:
                            outage.over()
                        return claims
                finally:
                    self._lock.release()
            if outage is None:
                outage = Outage(f"run {self._run_id}'s commit")
            await outage.wait(unavailable)

    async def _flush_soon(self) -> None:
        self._flush_queued = False  # a step held from here on queues another flush
        try:
            await self.flush()
        except Exception as exc:  # raised to the runner at its next step or commit; the held steps are lost
            if self._error is None:
                self._error = exc
            self._failed()
