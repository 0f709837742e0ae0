"""Saving a local file by its path (``rt.artifacts.save(Path)``), on ``file://`` and ``s3://``: the content
kept byte-equal, once per content, nothing left by a refused save; and, on ``file://`` (where the file is
copied into the store while hashed, one read), a save killed after its copy and before its row leaves
only what the GC pass removes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import anyio.to_thread
import pytest

from runtime import Runtime
from runtime.artifacts.s3 import PART_BYTES
from runtime.errors import InvalidInputError

pytestmark = pytest.mark.anyio


async def test_a_file_is_kept_byte_equal_and_its_content_once(blob_url: str, tmp_path: Path) -> None:
    source = tmp_path / "big.bin"
    data = os.urandom(2 * PART_BYTES + 7)  # several 4 MiB pieces, a multipart upload on S3
    source.write_bytes(data)
    async with Runtime.open(tmp_path / "home", workers=0, artifacts=blob_url) as rt:
        first = await rt.artifacts.save(source, name="big.bin")
        again = await rt.artifacts.save(source, name="again.bin")  # the same content: one blob
        assert (first.size, first.sha256) == (len(data), hashlib.sha256(data).hexdigest())
        assert again.key == first.key and again.id != first.id
        assert (await rt.artifacts.read(again.id))[1] == data
        assert [key for key, _ in await rt.artifacts.blobs.listed("local/default")] == [first.key]


async def test_a_file_over_the_size_limit_or_the_quota_leaves_nothing(blob_url: str, tmp_path: Path) -> None:
    big, small = tmp_path / "big.bin", tmp_path / "small.bin"
    big.write_bytes(b"x" * 9_000_000)  # three 4 MiB pieces: the copy stops after the first
    small.write_bytes(b"y" * 600)
    async with Runtime.open(tmp_path / "home", workers=0, artifacts=blob_url) as rt:
        rt.artifacts.max_bytes, rt.artifacts.quota_bytes = 1000, 1000
        with pytest.raises(InvalidInputError, match="over the artifact size limit of 1000 bytes"):
            await rt.artifacts.save(big, name="big.bin")
        kept = await rt.artifacts.save(small, name="small.bin")
        small.write_bytes(b"z" * 600)
        with pytest.raises(InvalidInputError, match="over its quota of 1000"):
            await rt.artifacts.save(small, name="more.bin")
        with pytest.raises(InvalidInputError, match="is not a file"):
            await rt.artifacts.save(tmp_path, name="a directory")
        assert [a.id for a in (await rt.artifacts.list())[0]] == [kept.id]
        assert [key for key, _ in await rt.artifacts.blobs.listed("local/default")] == [kept.key]


KILLED = """
import asyncio, os, signal, sys
from pathlib import Path
from runtime import Runtime

async def main() -> None:
    async with Runtime.open(sys.argv[1], workers=0, artifacts=sys.argv[2]) as rt:
        service, records, where = rt.artifacts, rt.artifacts.records, sys.argv[4]
        class Dies:  # killed at the records' step named by argv[4]
            def __getattr__(self, name):
                if name == where:
                    os.kill(os.getpid(), signal.SIGKILL)
                return getattr(records, name)
        service.records, service.quota_bytes = Dies(), 10**9  # a quota: its check comes after the copy
        await service.save(Path(sys.argv[3]), name="lost.bin")

asyncio.run(main())
"""


@pytest.mark.parametrize(
    "where",
    [
        "total_size",  # the file copied into the store under a temporary name, not yet in place
        "add",  # in place, durable, and no row names it
    ],
)
async def test_a_path_save_killed_before_its_row_leaves_only_what_a_gc_pass_removes(tmp_path: Path, where: str) -> None:
    home, url, source = tmp_path / "home", (tmp_path / "artifacts").as_uri(), tmp_path / "lost.bin"
    source.write_bytes(os.urandom(5_000_000))
    async with Runtime.open(home, workers=0, artifacts=url) as rt:
        kept = await rt.artifacts.save(b"kept", name="kept.txt")
    argv = [sys.executable, "-c", KILLED, str(home), url, str(source), where]
    assert (await anyio.to_thread.run_sync(lambda: subprocess.run(argv, timeout=120))).returncode == -9
    async with Runtime.open(home, workers=0, artifacts=url) as rt:
        assert [a.id for a in (await rt.artifacts.list())[0]] == [kept.id]  # no visible artifact
        left = [key for key, _ in await rt.artifacts.blobs.listed("local/default") if key != kept.key]
        assert len(left) == 1 and (".part-" in left[0]) == (where == "total_size")
        assert await rt.artifacts.collect(older_than_s=3600) == []  # too young: a save may be under way
        assert await rt.artifacts.collect(older_than_s=-60) == left
        assert [key for key, _ in await rt.artifacts.blobs.listed("local/default")] == [kept.key]
        again = await rt.artifacts.save(source, name="saved.bin")  # the content saves afresh
        assert (await rt.artifacts.read(again.id))[1] == source.read_bytes()
