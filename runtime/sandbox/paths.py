"""Path confinement: every path a sandbox is given must stay inside its workspace.

Two layers, because either alone has a hole:

1. ``relative_parts`` checks the *text*: no absolute paths, no NUL, no ``..`` that climbs above the
   root. Every backend uses it, so the same inputs are refused everywhere with the same message.
2. ``resolve_inside`` (local backend) follows symlinks with ``Path.resolve`` and refuses a result
   outside the root; ``open_beneath`` then opens the resolved path one component at a time with
   ``O_NOFOLLOW`` relative to a directory fd, so a symlink swapped in after the check (a race with a
   command running in the same workspace) makes the open fail instead of escaping.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Iterator
from pathlib import Path

from runtime.sandbox.base import PathEscapeError, SandboxError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def relative_parts(path: str) -> tuple[str, ...]:
    """Split a workspace-relative path into clean components ('' and '.' mean the root).

    Raises ``PathEscapeError`` for absolute paths and for ``..`` that would leave the workspace.
    """
    if not isinstance(path, str):
        raise SandboxError(f"path must be a string, got {type(path).__name__}")
    if "\x00" in path:
        raise SandboxError(f"path {path!r} contains a NUL byte; remove it")
    if path.startswith("/") or path == "~" or path.startswith("~/"):  # '~x' is a plain file name
        raise PathEscapeError(
            f"path {path!r} is absolute; sandbox paths are relative to the workspace root "
            "(e.g. 'src/main.py' instead of '/src/main.py')"
        )
    normal = posixpath.normpath(path or ".")
    if normal == ".":
        return ()
    if normal == ".." or normal.startswith("../"):
        raise PathEscapeError(
            f"path {path!r} leaves the workspace through '..'; use a path inside the workspace (e.g. 'data/file.txt')"
        )
    return tuple(normal.split("/"))


def display(parts: tuple[str, ...]) -> str:
    return "/".join(parts) or "."


def resolve_inside(root: Path, path: str) -> tuple[str, ...]:
    """The components of ``path`` after following symlinks, refused if they leave ``root``.

    ``root`` must already be resolved. Missing trailing components are fine (for writes).
    """
    parts = relative_parts(path)
    resolved = root.joinpath(*parts).resolve(strict=False)
    if resolved != root and not resolved.is_relative_to(root):
        raise PathEscapeError(
            f"path {path!r} resolves outside the workspace (a symlink points to {str(resolved)!r}); "
            "sandboxes only reach files inside their workspace"
        )
    return resolved.relative_to(root).parts


@contextlib.contextmanager
def open_dir_beneath(
    root_fd: int, parts: tuple[str, ...], *, create: bool = False, owner: int | None = None
) -> Iterator[int]:
    """A directory fd for ``parts`` under ``root_fd``, never following a symlink on the way.

    With ``create`` missing directories are made (given to uid and gid ``owner``, if set). The fd
    is closed on exit. ``FileNotFoundError`` and ``NotADirectoryError`` pass through for the caller
    to word; a symlink met on the way is a ``PathEscapeError``.
    """
    fd = os.dup(root_fd)
    try:
        for part in parts:
            nxt = _step(fd, part, create=create, parts=parts, owner=owner)
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def _step(fd: int, part: str, *, create: bool, parts: tuple[str, ...], owner: int | None = None) -> int:
    """Open one directory component under ``fd`` without following a symlink."""
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
    except NotADirectoryError:
        # O_DIRECTORY|O_NOFOLLOW on a symlink fails with ENOTDIR (not ELOOP): tell the two apart.
        if stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
            raise refused(parts, OSError(errno.ELOOP, "symlink")) from None
        raise
    except OSError as exc:
        raise refused(parts, exc) from exc
    made = False
    with contextlib.suppress(FileExistsError):
        os.mkdir(part, 0o755, dir_fd=fd)
        made = True
    try:
        new = os.open(part, _DIR_FLAGS, dir_fd=fd)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as exc:
        raise refused(parts, exc) from exc
    if made and owner is not None:
        os.fchown(new, owner, owner)  # by fd: what was made, even if a symlink took its name since
    return new


def refused(parts: tuple[str, ...], exc: OSError) -> SandboxError:
    """An OSError met while opening ``parts``, worded for the caller."""
    if exc.errno == errno.ELOOP:
        return PathEscapeError(
            f"path {display(parts)!r} changed into a symlink while being opened; refused to follow it"
        )
    return SandboxError(f"cannot open {display(parts)!r}: {exc.strerror}")
