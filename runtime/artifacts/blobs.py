"""Blob stores: where an artifact's bytes live, behind one small protocol (``BlobStore``).

Two implementations, chosen by URL (``--artifacts URL`` / ``$RATH_ARTIFACTS``):

- ``file:///ABSOLUTE/DIR`` (the default: ``HOME/artifacts``): one file per key, written to a temporary
  file in the same directory, fsynced, renamed into place and the directory fsynced, so a key holds
  its whole content or nothing, even across a crash; directories are 0700, files 0600.
- ``s3://BUCKET/PREFIX`` (``runtime/artifacts/s3.py``, extra ``rath-mcp[s3]``): any S3-compatible
  server, configured by ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION`` and
  ``AWS_ENDPOINT_URL``. An S3 PUT is atomic by itself; large uploads go in parts.

Keys are content addresses (``runtime.artifacts.model.blob_key``): a key is only ever written with
the same bytes, so a second ``put`` of a key present already is skipped, and two writers of one key
at once are harmless.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

import anyio.to_thread

from runtime.artifacts.model import CHUNK
from runtime.errors import InvalidInputError, NotFoundError


class BlobStore(Protocol):
    """Bytes by key. Every method raises ``StoreError`` (``StoreUnavailableError`` when the storage
    cannot be reached) and a read of a missing key ``NotFoundError``."""

    url: str

    async def put(self, key: str, data: bytes | Path) -> None:
        """Store ``data`` (bytes, or a file's content) at ``key``, atomically; durable on return."""
        ...

    async def exists(self, key: str) -> bool: ...

    async def read(self, key: str) -> memoryview:
        """The whole content, as the buffer it was read into (not copied again)."""
        ...

    def stream(self, key: str) -> AsyncIterator[memoryview]:
        """The content in pieces of about ``CHUNK`` bytes, never all in memory."""
        ...

    async def delete(self, key: str) -> None:
        """Remove the key (nothing happens when it is not there)."""
        ...

    async def move(self, key: str, to: str) -> bool:
        """Move the content at ``key`` to ``to`` (replacing it); False when ``key`` is not there."""
        ...

    async def listed(self, prefix: str) -> list[tuple[str, float]]:
        """Every key under ``prefix/`` (every key at all for ``""``) with when it was last written
        (seconds since the epoch)."""
        ...


def default_url(home: Path) -> str:
    return (home / "artifacts").as_uri()


def resolve_artifacts_url(url: str | None, home: Path) -> str:
    """``url`` if given, else ``$RATH_ARTIFACTS``, else ``file://HOME/artifacts``."""
    return url or os.environ.get("RATH_ARTIFACTS") or default_url(home)


def open_blob_store(url: str) -> BlobStore:
    """The blob store a URL names; ``InvalidInputError`` (one line saying what is accepted) otherwise."""
    parts = urlsplit(url)
    if parts.scheme == "file" and parts.netloc in ("", "localhost") and parts.path.startswith("/"):
        return FileBlobStore(Path(unquote(parts.path)))
    if parts.scheme == "s3" and parts.netloc:
        from runtime.artifacts.s3 import S3BlobStore  # only with the s3 extra

        return S3BlobStore(parts.netloc, parts.path.strip("/"))
    raise InvalidInputError(
        f"artifact store {url!r} is not file:///ABSOLUTE/DIR or s3://BUCKET/PREFIX "
        "(set --artifacts or $RATH_ARTIFACTS to one of those)"
    )


class FileBlobStore:
    """Blobs as files under ``root`` (0700), each written atomically and durably."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = root.as_uri()

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if not key or any(p in ("", ".", "..") for p in parts):  # keys are made by the service: a bug
            raise InvalidInputError(f"blob key {key!r} is not a plain relative path")
        return self.root.joinpath(*parts)

    async def put(self, key: str, data: bytes | Path) -> None:
        await anyio.to_thread.run_sync(self._put, self._path(key), data)

    def _put(self, path: Path, data: bytes | Path) -> None:
        if path.exists():
            return  # the same key holds the same bytes
        made = _makedirs(self.root, path.parent)
        fd, temp = tempfile.mkstemp(prefix=".part-", dir=path.parent)  # 0600
        try:
            with os.fdopen(fd, "wb") as out:
                if isinstance(data, Path):
                    with data.open("rb") as source:
                        while piece := source.read(CHUNK):
                            out.write(piece)
                else:
                    out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        for directory in [path.parent, *made]:  # the new name, and any directory made for it, survive a crash
            _fsync_dir(directory)

    async def exists(self, key: str) -> bool:
        return await anyio.to_thread.run_sync(self._path(key).is_file)

    async def read(self, key: str) -> memoryview:
        path = self._path(key)
        try:
            return memoryview(await anyio.to_thread.run_sync(path.read_bytes))
        except FileNotFoundError:
            raise NotFoundError(f"the bytes of {key!r} are missing from {self.url}") from None

    async def stream(self, key: str) -> AsyncIterator[memoryview]:
        path = self._path(key)
        try:
            source = await anyio.to_thread.run_sync(path.open, "rb")
        except FileNotFoundError:
            raise NotFoundError(f"the bytes of {key!r} are missing from {self.url}") from None
        try:
            while piece := await anyio.to_thread.run_sync(source.read, CHUNK):  # one thread hop per CHUNK
                yield memoryview(piece)
        finally:
            source.close()

    async def delete(self, key: str) -> None:
        await anyio.to_thread.run_sync(self._delete, self._path(key))

    async def move(self, key: str, to: str) -> bool:
        return await anyio.to_thread.run_sync(self._move, self._path(key), self._path(to))

    def _move(self, source: Path, target: Path) -> bool:
        try:
            os.replace(source, target)  # both under one directory tree: a rename
        except FileNotFoundError:
            return False
        _fsync_dir(target.parent)
        return True

    async def listed(self, prefix: str) -> list[tuple[str, float]]:
        return await anyio.to_thread.run_sync(self._listed, prefix)

    def _listed(self, prefix: str) -> list[tuple[str, float]]:
        base = self._path(prefix) if prefix else self.root
        found = []
        for directory, _, names in os.walk(base):
            for name in names:
                path = Path(directory) / name
                with contextlib.suppress(FileNotFoundError):
                    found.append((path.relative_to(self.root).as_posix(), path.stat().st_mtime))
        return found

    def _delete(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            _fsync_dir(path.parent)


def _makedirs(root: Path, directory: Path) -> list[Path]:
    """Make ``directory`` (under ``root``) and its missing parents, 0700; the parents of those made."""
    made: list[Path] = []
    if not root.is_dir():
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    missing = [d for d in [directory, *directory.parents] if d == root or d.is_relative_to(root)]
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            continue
        made.append(d.parent)
    return made


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
