"""The artifact store's scheduled GC pass (``ArtifactCollector``), run by ``serve`` and ``worker``.

A save killed between its upload and its row leaves bytes no row names; a delete killed midway
leaves its bytes moved aside and its mark in the store. ``ArtifactService.collect`` removes both
for one tenant/project; this runs it for every tenant/project that has bytes in the store, every
``interval_s`` (``--artifact-gc-interval``, ``$RATH_ARTIFACT_GC_S``; default an hour), as a task of
the runtime's task group: it lives and ends with the runtime that started it (no process-wide state).
Several processes on one store may each run it: a pass removes only bytes older than the grace
period that no row names, under the same marks a delete takes, so passes and saves may overlap.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import anyio

from runtime.artifacts.blobs import BlobStore
from runtime.artifacts.service import GRACE_S, ArtifactService
from runtime.errors import InvalidInputError, NotFoundError, StoreError
from runtime.ids import now
from runtime.periodic import Periodic

log = logging.getLogger(__name__)

INTERVAL_S = 3600.0
"""Seconds between two passes by default."""


class Clock(Protocol):
    """What the collector keeps time by (tests give their own: no pass waits on the wall clock there)."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class WallClock:
    def now(self) -> float:
        return now()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


def interval_from_env(given: float | None = None, env: Mapping[str, str] = os.environ) -> float:
    """Seconds between passes: ``given``, else ``$RATH_ARTIFACT_GC_S``, else an hour; 0 turns the pass off."""
    if given is None:
        text = env.get("RATH_ARTIFACT_GC_S")
        if not text:
            return INTERVAL_S
        try:
            given = float(text)
        except ValueError:
            given = -1.0
    if not given >= 0 or given == float("inf"):
        raise InvalidInputError(
            f"the artifact GC interval must be a number of seconds, 0 to turn it off (got {given!r}: "
            "set --artifact-gc-interval or $RATH_ARTIFACT_GC_S)"
        )
    return given


class ArtifactCollector:
    """Every ``interval_s``, ``collect`` in each tenant/project with bytes in ``blobs``."""

    def __init__(
        self,
        blobs: BlobStore,
        artifacts_of: Callable[[str, str], ArtifactService],
        interval_s: float = INTERVAL_S,
        *,
        grace_s: float = GRACE_S,
        clock: Clock | None = None,
        on_pass: Callable[[dict[tuple[str, str], list[str]]], Awaitable[None]] | None = None,
    ) -> None:
        self.blobs = blobs
        self.artifacts_of = artifacts_of
        self.interval_s = interval_s
        self.grace_s = grace_s
        self.clock = clock or WallClock()
        self.on_pass = on_pass

    async def run(self) -> None:
        """Pass after pass until cancelled, the first after one interval (``runtime.periodic``); a pass
        that fails (the store unreachable) is logged in a line and tried again at the next interval, as
        is one that fails otherwise (with its traceback)."""
        failed = "the artifact GC pass failed"
        periodic = Periodic(self._pass, self.interval_s, failed=failed, log=log, sleep=self._sleep, wait_first=True)
        await periodic.run()

    async def _sleep(self, seconds: float) -> None:
        await self.clock.sleep(seconds)  # the clock of now (a test gives its own after this was made)

    async def _pass(self) -> bool:
        try:
            removed = await self.pass_once()
        except (StoreError, NotFoundError) as exc:  # expected now and then: one line, no traceback
            log.warning("the artifact GC pass failed, trying again in %.0f s: %s", self.interval_s, exc)
            return False
        if self.on_pass is not None:
            await self.on_pass(removed)
        return False

    async def pass_once(self) -> dict[tuple[str, str], list[str]]:
        """One pass over every tenant/project found in the store; the keys removed, by scope."""
        at = self.clock.now()
        keys = [key.split("/") for key, _ in await self.blobs.listed("")]
        scopes = sorted({(parts[0], parts[1]) for parts in keys if len(parts) > 2})  # TENANT/PROJECT/ab/SHA
        removed: dict[tuple[str, str], list[str]] = {}
        for tenant, project in scopes:
            try:
                artifacts = self.artifacts_of(tenant, project)
            except InvalidInputError:  # not a directory this runtime made: not ours to clean
                continue
            gone = await artifacts.collect(self.grace_s, at=at)
            if gone:
                log.info("artifact GC: removed %d unreferenced blob(s) of %s/%s", len(gone), tenant, project)
            removed[(tenant, project)] = gone
        return removed
