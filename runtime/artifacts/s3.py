"""``s3://BUCKET/PREFIX``: blobs in any S3-compatible server (AWS S3, MinIO, SeaweedFS, R2, …), through obstore.

Why obstore (the Python binding of the Rust ``object_store`` crate) rather than boto3 or minio: it
is async itself (no thread per request, so a slow upload never holds a worker thread), one 5 MB
wheel with no Python dependencies (boto3 is 17 MB over 7 wheels, minio 9 wheels), and it does
multipart uploads of large files and streaming reads on its own. It reads the standard ``AWS_*``
variables: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``
and ``AWS_ENDPOINT_URL`` (a server other than AWS's; ``http://`` is allowed only then, and requests
name the bucket in the path, as MinIO and SeaweedFS expect).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from runtime.artifacts.model import CHUNK
from runtime.errors import NotFoundError, StoreError, StoreUnavailableError
from runtime.extras import require_extra

#: obstore retries a failed request with backoff; an unreachable server is reported within this.
RETRY_S = 10
#: Content past this goes up in parts of this size, ``PARTS_AT_ONCE`` at a time (obstore's defaults are
#: 5 MB and 12). On SeaweedFS here, 100 MB took a median 539 ms in 8 MiB parts x 8, 551 ms in 5 MB x 12 and
#: 592 ms in 16 MiB x 8 (12 interleaved rounds each): no setting wins clearly, so the one holding least
#: in flight among the fastest (64 MiB per upload). bench.artifacts gives its baseline the same.
PART_BYTES = 8 * 1024 * 1024
PARTS_AT_ONCE = 8


class S3BlobStore:
    """Blobs as objects ``PREFIX/KEY`` of ``BUCKET``."""

    def __init__(self, bucket: str, prefix: str) -> None:
        self._obs: Any = require_extra("obstore", "s3")
        store_module: Any = require_extra("obstore.store", "s3")
        self.url = f"s3://{bucket}/{prefix}".rstrip("/")
        endpoint = os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT")
        config: dict[str, Any] = {}
        client: dict[str, Any] = {"connect_timeout": timedelta(seconds=5), "timeout": timedelta(minutes=10)}
        if endpoint:
            config.update(endpoint=endpoint, virtual_hosted_style_request=False)
            client["allow_http"] = endpoint.startswith("http://")
        if not os.environ.get("AWS_REGION") and not os.environ.get("AWS_DEFAULT_REGION"):
            config["region"] = "us-east-1"  # what S3-compatible servers accept when none is named
        try:
            self._store = store_module.S3Store(
                bucket,
                prefix=prefix or None,
                config=config,
                client_options=client,
                retry_config={"max_retries": 3, "retry_timeout": timedelta(seconds=RETRY_S)},
            )
        except Exception as exc:  # a bad variable: say which
            raise StoreError(f"cannot use the S3 artifact store {self.url}: {exc}") from exc

    async def put(self, key: str, data: bytes | Path) -> None:
        with self._translated(key):
            # a PUT is atomic, and so is a multipart upload: the object appears whole when it completes
            await self._obs.put_async(self._store, key, data, chunk_size=PART_BYTES, max_concurrency=PARTS_AT_ONCE)

    async def exists(self, key: str) -> bool:
        try:
            with self._translated(key):
                await self._obs.head_async(self._store, key)
        except NotFoundError:
            return False
        return True

    async def read(self, key: str) -> memoryview:
        with self._translated(key):
            got = await self._obs.get_async(self._store, key)
            return memoryview(await got.bytes_async())  # obstore's own buffer: copying 100 MB costs ~0.2 s here

    async def stream(self, key: str) -> AsyncIterator[memoryview]:
        with self._translated(key):
            got = await self._obs.get_async(self._store, key)
            async for piece in got.stream(min_chunk_size=CHUNK):
                yield memoryview(piece)

    async def delete(self, key: str) -> None:
        with self._translated(key):
            await self._obs.delete_async(self._store, key)

    async def move(self, key: str, to: str) -> bool:
        try:
            with self._translated(key):
                await self._obs.rename_async(self._store, key, to)  # a server-side copy, then a delete
        except NotFoundError:
            return False
        return True

    async def listed(self, prefix: str) -> list[tuple[str, float]]:
        found: list[tuple[str, float]] = []
        with self._translated(prefix):
            async for batch in self._obs.list(self._store, prefix + "/" if prefix else None):
                found.extend((meta["path"], meta["last_modified"].timestamp()) for meta in batch)
        return found

    @contextlib.contextmanager
    def _translated(self, key: str) -> Iterator[None]:
        """obstore's errors as the runtime's: a missing object, a refusal, an unreachable server."""
        try:
            yield
        except (StoreError, NotFoundError):
            raise
        except Exception as exc:
            errors: Any = require_extra("obstore.exceptions", "s3")
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if isinstance(exc, FileNotFoundError | errors.NotFoundError):
                raise NotFoundError(f"the bytes of {key!r} are missing from {self.url}") from exc
            if isinstance(exc, errors.PermissionDeniedError | errors.UnauthenticatedError):
                raise StoreError(
                    f"the S3 server refused {self.url}/{key}: {first} "
                    "(check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
                ) from exc
            code = re.search(r"<Code>([^<]+)</Code>(?:<Message>([^<]*)</Message>)?", str(exc))
            if code:  # the server answered, and said no
                said = f"{code[1]}: {code[2]}" if code[2] else code[1]
                raise StoreError(f"the S3 server refused {self.url}/{key}: {said}") from exc
            if isinstance(exc, errors.BaseError | OSError | TimeoutError):
                raise StoreUnavailableError(
                    f"the S3 artifact store {self.url} failed on {key!r}: {first} "
                    "(is AWS_ENDPOINT_URL right and the server up?)"
                ) from exc
            raise
