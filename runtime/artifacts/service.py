"""``ArtifactService``: keep files beyond their sandbox, in one tenant/project (``rt.artifacts``).

Saving writes the bytes first (to the blob store, atomically, under the content's address) and the
metadata row only once they are durable, so a crash in between leaves at most bytes no row names,
never a row without its bytes. Reading another scope's artifact is "not found", in the words a
random id gets. Deleting removes the row, and the bytes when no other artifact of the scope names
the same content.
"""

from __future__ import annotations

import builtins
import hashlib
import mimetypes
import os
import posixpath
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio.to_thread

from runtime.artifacts.blobs import BlobStore
from runtime.artifacts.model import CHUNK, Artifact, ArtifactRecords, blob_key
from runtime.errors import InvalidInputError, NotFoundError, UsageError
from runtime.ids import is_id, new_id, now
from runtime.sandbox.policy import parse_size

if TYPE_CHECKING:
    from runtime.sandbox.registry import SandboxRegistry
    from runtime.sessions.service import SessionService

MAX_BYTES = 1024**3
"""An artifact's size limit by default (1 GiB)."""
NAME_CHARS = 255
ASIDE = ".deleting-"
"""Bytes being deleted are moved to ``KEY.deleting-…`` first (see ``_drop_content``)."""
GRACE_S = 3600.0
"""A GC pass leaves bytes younger than this: a save may have uploaded them and not yet written its row."""
ASK_FIRST_BYTES = 1024 * 1024
"""Content larger than this is looked for before it is uploaded (smaller is simply put again: a key
only ever holds the same bytes)."""


class ArtifactService:
    """The artifacts of one tenant/project: bytes in ``blobs``, metadata in ``records``."""

    def __init__(
        self,
        records: ArtifactRecords,
        blobs: BlobStore,
        tenant: str,
        project: str,
        sessions: SessionService,
        sandboxes: SandboxRegistry,
        *,
        max_bytes: int | None = None,
        quota_bytes: int | None = None,
    ) -> None:
        self.records = records
        self.blobs = blobs
        self.tenant = tenant
        self.project = project
        self.sessions = sessions
        self.sandboxes = sandboxes
        from_env = limits_from_env()  # a bad value is an error when the runtime opens (its first scope)
        self.max_bytes = max_bytes if max_bytes is not None else from_env[0]
        self.quota_bytes = quota_bytes if quota_bytes is not None else from_env[1]

    async def save(
        self,
        data: bytes | Path,
        *,
        name: str,
        mime_type: str | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
    ) -> Artifact:
        """Keep ``data`` (bytes, or a local file's content) as a new artifact named ``name``."""
        name = _check_name(name)
        if isinstance(data, Path):
            size, sha = await anyio.to_thread.run_sync(_hash_file, data, self.max_bytes)
        else:
            size, sha = len(data), await _digest(data)
        return await self._save(data, size, sha, name, mime_type, session_id, run_id)

    async def _save(
        self,
        data: bytes | Path,
        size: int,
        sha: str,
        name: str,
        mime_type: str | None,
        session_id: str | None,
        run_id: str | None,
    ) -> Artifact:
        """``save`` once the content is hashed (once: the address is the hash, so it precedes the upload)."""
        self._check_size(name, size)
        if self.quota_bytes is not None:
            used = await self.records.total_size()
            if used + size > self.quota_bytes:
                raise InvalidInputError(
                    f"saving {name!r} ({size} bytes) would take this tenant/project to {used + size} bytes of "
                    f"artifacts, over its quota of {self.quota_bytes}: delete some with artifact_delete first"
                )
        key = blob_key(self.tenant, self.project, sha)
        # Kept already? Worth a round trip to ask only when the upload would cost more than the question.
        if size <= ASK_FIRST_BYTES or not await self.blobs.exists(key):
            await self.blobs.put(key, data)
        artifact = Artifact(
            id=new_id("art"),
            tenant=self.tenant,
            project=self.project,
            name=name,
            size=size,
            sha256=sha,
            mime_type=mime_type or guess_mime_type(name, data if isinstance(data, bytes) else None),
            session_id=session_id,
            run_id=run_id,
            created_at=now(),
        )
        deleting = await self.records.add(artifact)  # only now that the bytes are durable
        if deleting and not await self.blobs.exists(key):  # a delete of this content's last other artifact raced
            await self.blobs.put(key, data)
        return artifact

    async def keep(
        self, data: bytes, *, name: str, mime_type: str, session_id: str | None = None, run_id: str | None = None
    ) -> Artifact:
        """``save``, unless an artifact of this tenant/project has the same content, name, type, session
        and run already: then that one. A result handed over as a link (``session_get`` of a large page
        asked twice, a client polling a large export) names one artifact, not one more each time."""
        name = _check_name(name)
        sha = await _digest(data)
        found = await self.records.find(sha, name, session_id, run_id)
        if found is not None and found.mime_type == mime_type:
            return found
        return await self._save(data, len(data), sha, name, mime_type, session_id, run_id)

    async def save_from_session(self, session_id: str, path: str, *, run_id: str | None = None) -> Artifact:
        """Keep a file of a session's sandbox workspace: the sandbox's own path checks apply (no
        absolute path, no ``..`` or symlink out of the workspace, not a directory, within its read limit)."""
        info = await self.sessions.info(session_id)
        sandbox = await self.sandboxes.get(info.placement)
        data = await sandbox.read_file(path)
        return await self.save(
            data, name=posixpath.basename(path.rstrip("/")) or path, session_id=session_id, run_id=run_id
        )

    async def get(self, artifact_id: str) -> Artifact:
        found = await self.records.get(artifact_id) if is_id(artifact_id, "art") else None
        if found is None:
            raise NotFoundError(f"artifact {artifact_id} not found (artifact_list shows the ones there are)")
        return found

    async def read(self, artifact_id: str) -> tuple[Artifact, memoryview]:
        """The artifact and its whole content (a read-only buffer: ``bytes(content)`` copies it)."""
        artifact = await self.get(artifact_id)
        return artifact, await self.blobs.read(artifact.key)

    async def stream(self, artifact_id: str) -> tuple[Artifact, AsyncIterator[memoryview]]:
        artifact = await self.get(artifact_id)
        return artifact, self.blobs.stream(artifact.key)

    async def list(
        self,
        *,
        session_id: str | None = None,
        run_id: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> tuple[Sequence[Artifact], str | None]:
        """A page, oldest first, and the cursor of the next page (None on the last)."""
        if not 1 <= limit <= 1000:
            raise InvalidInputError(f"limit must be 1 to 1000 (got {limit})")
        page = await self.records.list(session_id=session_id, run_id=run_id, after=cursor, limit=limit + 1)
        more = len(page) > limit
        page = page[:limit]
        return page, (page[-1].id if more else None)

    async def delete(self, artifact_id: str) -> Artifact:
        """Remove an artifact; its bytes too when no other artifact of this tenant/project has them."""
        token = new_id("del")[4:]
        gone, left = await self.records.delete(artifact_id, token) if is_id(artifact_id, "art") else (None, 0)
        if gone is None:
            raise NotFoundError(f"artifact {artifact_id} not found (artifact_list shows the ones there are)")
        if left == 0:
            await self._drop_content(gone.key, gone.sha256, token)
            await self.records.end_deletion(gone.sha256, token)
        return gone

    async def _drop_content(self, key: str, sha: str, token: str) -> None:
        """Remove the bytes of ``sha`` unless a save raced in. While the content is marked as being
        deleted, a save of it checks its bytes once its row is committed (putting them again if
        missing); here the bytes are moved aside, the rows naming them counted again, and put back
        if a save's row appeared: whichever order the two take, the saved artifact keeps its bytes."""
        aside = f"{key}{ASIDE}{token}"
        if not await self.blobs.move(key, aside):
            return
        if await self.records.refs(sha) and not await self.blobs.exists(key):
            await self.blobs.move(aside, key)
        else:
            await self.blobs.delete(aside)

    async def collect(self, older_than_s: float = GRACE_S, *, at: float | None = None) -> builtins.list[str]:
        """A GC pass: remove the bytes no artifact of this tenant/project names (left by a save that
        died between its upload and its row, or a delete between its move and its removal), when
        older than ``older_than_s`` at ``at`` (default now; a save in progress has uploaded and not yet
        written its row), and forget the marks of deletes that died as long ago. Unnamed bytes go the
        way a delete's do (marked, moved aside, counted again), so a save of that content racing the
        pass keeps its bytes."""
        removed: builtins.list[str] = []
        cutoff = (now() if at is None else at) - older_than_s
        for key, written in await self.blobs.listed(f"{self.tenant}/{self.project}"):
            if written > cutoff:
                continue
            if ASIDE in key:  # a delete died between moving the bytes aside and removing them
                await self.blobs.delete(key)
                removed.append(key)
                continue
            sha = key.rsplit("/", 1)[-1]
            token = new_id("del")[4:]
            if await self.records.mark_unreferenced(sha, token) == 0:
                await self._drop_content(key, sha, token)
                await self.records.end_deletion(sha, token)
                removed.append(key)
        await self.records.end_deletions_before(cutoff)
        return removed

    def _check_size(self, name: str, size: int) -> None:
        if size > self.max_bytes:
            raise InvalidInputError(f"{name!r} is {size} bytes, over the artifact size limit of {self.max_bytes} bytes")


def limits_from_env(env: Mapping[str, str] = os.environ) -> tuple[int, int | None]:
    """The size limit of one artifact (``$RATH_ARTIFACT_MAX_BYTES``, default 1 GiB) and the quota of a
    tenant/project (``$RATH_ARTIFACT_QUOTA``, default none), as sizes such as ``512M`` or ``20G``."""
    max_text, quota_text = env.get("RATH_ARTIFACT_MAX_BYTES"), env.get("RATH_ARTIFACT_QUOTA")
    try:
        limit = parse_size(max_text, "RATH_ARTIFACT_MAX_BYTES") if max_text else MAX_BYTES
        quota = parse_size(quota_text, "RATH_ARTIFACT_QUOTA") if quota_text else None
    except UsageError as exc:
        raise InvalidInputError(str(exc)) from None
    return limit, quota


def _check_name(name: str) -> str:
    if not name or len(name) > NAME_CHARS or "/" in name or "\x00" in name:
        raise InvalidInputError(f"an artifact name must be 1 to {NAME_CHARS} characters with no '/' (got {name!r})")
    return name


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def _digest(data: bytes) -> str:
    """The content's sha256: over 1 MiB in a thread (hashlib lets go of the GIL: the loop serves others
    meanwhile, ~1 ms a MB here), smaller on the loop (cheaper than the thread hop)."""
    return await anyio.to_thread.run_sync(_sha256, data) if len(data) > ASK_FIRST_BYTES else _sha256(data)


def _hash_file(path: Path, limit: int) -> tuple[int, str]:
    if not path.is_file():
        raise InvalidInputError(f"{str(path)!r} is not a file")
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as source:
        while piece := source.read(CHUNK):
            digest.update(piece)
            size += len(piece)
            if size > limit:
                break
    return size, digest.hexdigest()


def guess_mime_type(name: str, data: bytes | None) -> str:
    """By the name's extension; else ``text/plain`` for UTF-8 text, ``application/octet-stream`` for other bytes."""
    guessed, _ = mimetypes.guess_type(name, strict=False)
    if guessed:
        return guessed
    if data is not None:
        try:
            data[:65536].decode("utf-8")
        except UnicodeDecodeError:
            return "application/octet-stream"
        return "text/plain"
    return "application/octet-stream"


def is_text(mime_type: str) -> bool:
    """Whether content of this type is served as text (else as a base64 blob)."""
    return mime_type.startswith("text/") or mime_type in (
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-ndjson",
        "application/yaml",
    )
