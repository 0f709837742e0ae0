"""The blob stores' contract, the same tests on ``file://`` and on ``s3://`` (a real SeaweedFS server)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from runtime.artifacts.blobs import FileBlobStore, open_blob_store
from runtime.artifacts.model import CHUNK
from runtime.artifacts.s3 import PART_BYTES
from runtime.errors import InvalidInputError, NotFoundError, StoreError, StoreUnavailableError

pytestmark = pytest.mark.anyio


def key_of(data: bytes) -> str:
    sha = hashlib.sha256(data).hexdigest()
    return f"acme/web/{sha[:2]}/{sha}"


async def test_bytes_put_read_back_equal_whole_and_streamed(blob_url: str) -> None:
    blobs = open_blob_store(blob_url)
    data = os.urandom(CHUNK * 2 + 123)
    key = key_of(data)
    assert not await blobs.exists(key)
    await blobs.put(key, data)
    await blobs.put(key, data)  # the same content again: harmless
    assert await blobs.exists(key)
    assert await blobs.read(key) == data
    pieces = [p async for p in blobs.stream(key)]
    assert b"".join(pieces) == data and len(pieces) >= 2
    await blobs.delete(key)
    assert not await blobs.exists(key)
    await blobs.delete(key)  # deleting what is gone is no error
    with pytest.raises(NotFoundError, match="missing"):
        await blobs.read(key)


async def test_a_file_s_content_is_put_from_its_path(blob_url: str, tmp_path: Path) -> None:
    blobs = open_blob_store(blob_url)
    source = tmp_path / "big.bin"
    data = os.urandom(2 * PART_BYTES + 7)  # over the part size: a multipart upload on S3
    source.write_bytes(data)
    await blobs.put(key_of(data), source)
    assert await blobs.read(key_of(data)) == data


async def test_the_file_store_is_private_and_leaves_no_partial_files(tmp_path: Path) -> None:
    root = tmp_path / "home" / "artifacts"
    blobs = FileBlobStore(root)
    await blobs.put(key_of(b"hello"), b"hello")
    for directory in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = [p for p in root.rglob("*") if p.is_file()]
    assert [p.name for p in files] == [hashlib.sha256(b"hello").hexdigest()]
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600


def test_an_unknown_url_says_what_is_accepted() -> None:
    for url in ("ftp://x/y", "file://relative", "s3://"):
        with pytest.raises(InvalidInputError, match=r"file:///ABSOLUTE/DIR or s3://BUCKET/PREFIX"):
            open_blob_store(url)


async def test_an_unreachable_s3_server_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    blobs = open_blob_store("s3://nowhere/p")
    with pytest.raises(StoreUnavailableError, match=r"s3://nowhere/p failed .*is AWS_ENDPOINT_URL right"):
        await blobs.put(key_of(b"x"), b"x")


async def test_wrong_s3_keys_are_refused_in_words(s3_env: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    blobs = open_blob_store("s3://rath-tests/refused")
    with pytest.raises(Exception, match=r"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY|refused"):
        await blobs.put(key_of(b"x"), b"x")


async def test_a_bucket_the_server_refuses_is_named_with_its_reason(s3_env: object) -> None:
    blobs = open_blob_store("s3://b/p")  # a bucket name must have 3 characters at least
    with pytest.raises(StoreError, match=r"the S3 server refused s3://b/p/.*InvalidBucketName"):
        await blobs.put(key_of(b"x"), b"x")
