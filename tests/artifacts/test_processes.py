"""Two processes saving the same content at once into one store: two artifacts, one copy of the bytes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio.to_thread
import pytest

from runtime import Runtime

pytestmark = pytest.mark.anyio

SAVER = """
import asyncio, sys
from runtime import Runtime

async def main() -> None:
    async with Runtime.open(sys.argv[1], workers=0, artifacts=sys.argv[2]) as rt:
        for i in range(20):
            saved = await rt.artifacts.save(b"the same content, from two processes" * 1000, name=f"{sys.argv[3]}-{i}")
        print(saved.id)

asyncio.run(main())
"""


def run_savers(home: Path, blob_url: str) -> None:
    savers = [
        subprocess.Popen([sys.executable, "-c", SAVER, str(home), blob_url, name], stdout=subprocess.PIPE, text=True)
        for name in ("one", "two")
    ]
    outputs = [p.communicate(timeout=120)[0] for p in savers]
    assert [p.returncode for p in savers] == [0, 0], outputs


async def test_two_processes_saving_the_same_content_share_one_copy(blob_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with Runtime.open(home, workers=0, artifacts=blob_url):  # made and migrated before either starts
        pass
    await anyio.to_thread.run_sync(run_savers, home, blob_url)
    async with Runtime.open(home, workers=0, artifacts=blob_url) as rt:
        page, _ = await rt.artifacts.list(limit=100)
        assert len(page) == 40 and len({a.sha256 for a in page}) == 1
        assert sorted(a.name for a in page) == sorted(f"{n}-{i}" for n in ("one", "two") for i in range(20))
        assert [key for key, _ in await rt.artifacts.blobs.listed("local/default")] == [page[0].key]
        for artifact_id in (page[0].id, page[-1].id):
            assert (await rt.artifacts.read(artifact_id))[1] == b"the same content, from two processes" * 1000


KILLED = """
import asyncio, os, signal, sys
from runtime import Runtime

async def main() -> None:
    async with Runtime.open(sys.argv[1], workers=0, artifacts=sys.argv[2]) as rt:
        service = rt.artifacts
        class DiesBeforeTheRow:  # the bytes are uploaded; the process is killed before its row is written
            def __getattr__(self, name):
                return getattr(service.records, name)
            async def add(self, artifact):
                os.kill(os.getpid(), signal.SIGKILL)
        service.records = DiesBeforeTheRow()
        await service.save(b"bytes of a save that never finished", name="lost.txt")

asyncio.run(main())
"""


def run_killed(home: Path, blob_url: str) -> int:
    return subprocess.run([sys.executable, "-c", KILLED, str(home), blob_url], timeout=120).returncode


async def test_a_save_killed_between_upload_and_row_leaves_nothing_after_a_gc_pass(
    blob_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    async with Runtime.open(home, workers=0, artifacts=blob_url) as rt:
        kept = await rt.artifacts.save(b"kept", name="kept.txt")
    assert await anyio.to_thread.run_sync(run_killed, home, blob_url) == -9
    async with Runtime.open(home, workers=0, artifacts=blob_url) as rt:
        assert [a.id for a in (await rt.artifacts.list())[0]] == [kept.id]  # no visible artifact
        assert len(await rt.artifacts.blobs.listed("local/default")) == 2  # its bytes, named by no row
        assert len(await rt.artifacts.collect(older_than_s=-60)) == 1
        assert [key for key, _ in await rt.artifacts.blobs.listed("local/default")] == [kept.key]
