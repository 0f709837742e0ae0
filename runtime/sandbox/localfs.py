"""File operations of the local backend, each confined to the workspace (see ``paths``).

These are blocking functions; ``LocalSandbox`` runs them in a worker thread. Every one resolves the
path (refusing escapes), then opens it through a no-follow walk from an fd of the workspace root,
so the check and the use cannot be told apart by a symlink raced in between.
Writes go to a temporary file in the target directory and are renamed into place: a reader never
sees half a file, and a failed write leaves the old content. A write that would take the workspace
over its size cap is refused before anything is written (``WorkspaceFullError``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from runtime.sandbox.base import (
    DEFAULT_MAX_FILE_BYTES,
    FileEntry,
    NotAFileError,
    SandboxError,
    SandboxFileNotFoundError,
    WorkspaceFullError,
    to_bytes,
    too_large,
)
from runtime.sandbox.paths import display, open_dir_beneath, refused, resolve_inside

# O_NONBLOCK: opening a FIFO someone made in the workspace must not hang; it is refused below.
_FILE_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def tree_bytes(root: Path) -> int:
    """Disk space used by the files under ``root`` (symlinks not followed; unreadable parts skipped)."""
    total, todo = 0, [str(root)]
    while todo:
        try:
            with os.scandir(todo.pop()) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if stat.S_ISDIR(st.st_mode):
                        todo.append(entry.path)
        except OSError:
            continue
    return total


class LocalFiles:
    """Confined file access under one resolved workspace root."""

    def __init__(
        self,
        root: Path,
        workspace: str,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_workspace_bytes: int | None = None,
        owner: int | None = None,
    ) -> None:
        """``owner``: the uid (and gid) given what the file tools create: a root server's tool uid,
        so that its commands can change the files the tools wrote (confine.py)."""
        self.root = root
        self.owner = owner
        self.workspace = workspace
        self.max_file_bytes = max_file_bytes
        self.max_workspace_bytes = max_workspace_bytes

    def over_cap(self) -> bool:
        """Whether the workspace uses more than its cap (checked after each command)."""
        return self.max_workspace_bytes is not None and tree_bytes(self.root) > self.max_workspace_bytes

    def _check_room(self, parts: tuple[str, ...], size: int) -> None:
        if self.max_workspace_bytes is None:
            return
        old = self._lstat(parts)
        freed = old.st_blocks * 512 if old is not None and stat.S_ISREG(old.st_mode) else 0
        used = tree_bytes(self.root)
        if used - freed + size > self.max_workspace_bytes:
            raise WorkspaceFullError(
                f"writing {size} bytes to {display(parts)!r} would take workspace {self.workspace!r} over its "
                f"{self.max_workspace_bytes}-byte cap ({used} bytes used); delete files you no longer need, "
                "or raise the cap with sandbox.workspace_size in config.json"
            )

    @contextlib.contextmanager
    def _dir(self, parts: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
        """An fd of the directory ``parts`` (``()``: the root), reached by a no-follow walk from the root."""
        root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with open_dir_beneath(root_fd, parts, create=create, owner=self.owner) as dir_fd:
                yield dir_fd
        finally:
            os.close(root_fd)

    def _missing(self, path: str) -> SandboxFileNotFoundError:
        return SandboxFileNotFoundError(
            f"no such file or directory {path!r} in workspace {self.workspace!r}; list_dir('.') shows what exists"
        )

    def _lstat(self, parts: tuple[str, ...]) -> os.stat_result | None:
        """lstat of the resolved path, or None if it (or a parent) does not exist."""
        try:
            with self._dir(parts[:-1]) as dir_fd:
                return os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False) if parts else os.stat(dir_fd)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def exists(self, path: str) -> bool:
        return self._lstat(resolve_inside(self.root, path)) is not None

    def directory(self, path: str) -> Path:
        """The absolute path of an existing directory in the workspace (a command's cwd)."""
        parts = resolve_inside(self.root, path)
        st = self._lstat(parts)
        if st is None:
            raise self._missing(path)
        if not stat.S_ISDIR(st.st_mode):
            raise NotAFileError(f"{path!r} is a file, not a directory; pass a directory as cwd")
        return self.root.joinpath(*parts)

    def read(self, path: str) -> bytes:
        parts = resolve_inside(self.root, path)
        if not parts:
            raise NotAFileError("'.' is the workspace directory; read a file in it (see list_dir('.'))")
        try:
            with self._dir(parts[:-1]) as dir_fd:
                fd = os.open(parts[-1], _FILE_READ, dir_fd=dir_fd)
        except (FileNotFoundError, NotADirectoryError):
            raise self._missing(path) from None
        except OSError as exc:
            raise refused(parts, exc) from exc
        try:
            st = os.fstat(fd)
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                raise NotAFileError(f"{path!r} is a directory; use list_dir({path!r}) to see its entries")
            if not stat.S_ISREG(mode):
                raise NotAFileError(f"{path!r} is not a regular file (a device, FIFO or socket); it cannot be read")
            if st.st_size > self.max_file_bytes:
                raise too_large(path, st.st_size, self.max_file_bytes)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as handle:
            return handle.read(self.max_file_bytes + 1)[: self.max_file_bytes]  # it may have grown since fstat

    def write(self, path: str, data: bytes | str) -> None:
        payload = to_bytes(data)
        assert payload is not None
        parts = resolve_inside(self.root, path)
        if not parts:
            raise NotAFileError("'.' is the workspace directory; write to a file in it, e.g. 'notes.txt'")
        self._check_room(parts, len(payload))
        try:
            with self._dir(parts[:-1], create=True) as dir_fd:
                self._replace(dir_fd, parts, payload)
        except NotADirectoryError:
            raise SandboxError(f"a parent of {path!r} is a file, not a directory; choose another path") from None

    def _replace(self, dir_fd: int, parts: tuple[str, ...], payload: bytes) -> None:
        name = parts[-1]
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                raise NotAFileError(f"{display(parts)!r} is a directory; choose a file path")
        tmp = f".{name}.rath-{os.urandom(4).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as handle:
                if self.owner is not None:
                    os.fchown(handle.fileno(), self.owner, self.owner)
                handle.write(payload)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise

    def list(self, path: str = ".") -> list[FileEntry]:
        parts = resolve_inside(self.root, path)
        try:
            with self._dir(parts) as dir_fd:
                entries = []
                for name in os.listdir(dir_fd):
                    try:
                        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed since the listing (by a command running here): not an entry now
                    is_dir = stat.S_ISDIR(st.st_mode)
                    entries.append(FileEntry(name=name, is_dir=is_dir, size=0 if is_dir else st.st_size))
        except FileNotFoundError:
            raise self._missing(path) from None
        except NotADirectoryError:
            raise NotAFileError(f"{path!r} is a file, not a directory; use read_file({path!r})") from None
        return sorted(entries, key=lambda e: e.name)
