"""The scheduled GC pass (``ArtifactCollector``) on ``file://`` and ``s3://`` (a real SeaweedFS), on an
injected clock: the test says when each interval has passed and waits for the pass to report, so no
step depends on how fast anything runs.

Left as a SIGKILL leaves them: bytes uploaded with no row (in two tenants), bytes a delete moved aside,
and the mark of a delete that never ended. A pass before the grace period has gone removes nothing; the
next one removes all of them, in every tenant, and keeps the bytes of a live artifact.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from runtime import Runtime
from runtime.artifacts.collector import ArtifactCollector, interval_from_env
from runtime.artifacts.model import Artifact, blob_key
from runtime.artifacts.service import ASIDE, GRACE_S
from runtime.errors import InvalidInputError
from runtime.ids import new_id, now

pytestmark = pytest.mark.anyio
Removed = dict[tuple[str, str], list[str]]


class SteppedClock:
    """Time moves only when the test says; each ``sleep`` waits for the test's go."""

    def __init__(self) -> None:
        self.at = now()
        self.slept: list[float] = []
        self.go, self.wait = anyio.create_memory_object_stream[float](1)

    def now(self) -> float:
        return self.at

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.at += seconds + await self.wait.receive()  # the interval, and any extra the test adds


def row(sha: str) -> Artifact:
    return Artifact(new_id("art"), "acme", "web", "x.bin", 1, sha, "application/octet-stream", None, None, now())


async def test_a_pass_every_interval_removes_what_no_row_names_once_past_the_grace_period(
    blob_url: str, tmp_path: Path
) -> None:
    async with Runtime.open(tmp_path / "home", artifacts=blob_url, tenant="acme", project="web") as rt:
        kept = await rt.artifacts.save(b"a live artifact", name="live.txt")
        orphans = []
        for tenant, data in (("acme", b"uploaded, then SIGKILL"), ("globex", b"another tenant's orphan")):
            key = blob_key(tenant, "web", hashlib.sha256(data).hexdigest())
            await rt.blobs.put(key, data)  # what a save killed between its upload and its row leaves
            orphans.append(key)
        moved = await rt.artifacts.save(b"deleted midway", name="d.txt")
        aside = f"{moved.key}{ASIDE}dead"
        await rt.blobs.move(moved.key, aside)  # a delete killed between moving the bytes aside and removing them
        await rt.artifacts.records.delete(moved.id, "dead")  # ... whose mark stays
        stale = "c" * 64
        assert await rt.artifacts.records.mark_unreferenced(stale, "dead") == 0  # a mark no delete will end

        clock = SteppedClock()
        reports, reported = anyio.create_memory_object_stream[Removed](1)

        collector = rt.artifact_collector(90.0)  # what serve and worker run, every tenant/project's artifacts
        collector.clock, collector.on_pass = clock, reports.send
        with clock.go, clock.wait, reports, reported:
            removed = await two_passes(collector, clock, reported)
        assert sorted(removed[("acme", "web")]) == sorted([orphans[0], aside])
        assert removed[("globex", "web")] == [orphans[1]]
        assert clock.slept[:2] == [90.0, 90.0]
        for key in [*orphans, aside]:
            assert not await rt.blobs.exists(key)
        assert (await rt.artifacts.read(kept.id))[1] == b"a live artifact"
        assert not await rt.artifacts.records.add(row(stale))  # the dead delete's mark is forgotten
        assert not await rt.artifacts.records.add(row(moved.sha256))


async def two_passes(
    collector: ArtifactCollector, clock: SteppedClock, reported: MemoryObjectReceiveStream[Removed]
) -> Removed:
    async with anyio.create_task_group() as tg:
        tg.start_soon(collector.run)
        await clock.go.send(0.0)  # one interval: everything is younger than the grace period
        assert await reported.receive() == {("acme", "web"): [], ("globex", "web"): []}
        await clock.go.send(GRACE_S)  # the next interval, past the grace period
        removed = await reported.receive()
        tg.cancel_scope.cancel()
    return removed


def test_the_interval_is_configurable_and_a_bad_one_says_how_to_set_it() -> None:
    assert interval_from_env(None, {}) == 3600.0
    assert interval_from_env(None, {"RATH_ARTIFACT_GC_S": "120"}) == 120.0
    assert interval_from_env(0.0, {"RATH_ARTIFACT_GC_S": "120"}) == 0.0  # given: 0 turns it off
    for bad in ("soon", "-5", "nan", "inf"):
        with pytest.raises(InvalidInputError, match=r"--artifact-gc-interval or \$RATH_ARTIFACT_GC_S"):
            interval_from_env(None, {"RATH_ARTIFACT_GC_S": bad})
    assert not math.isnan(interval_from_env(None, {"RATH_ARTIFACT_GC_S": "0.5"}))
