"""Copying and removing workspace directories: the part of forking a session that touches disk.

``copy_tree`` asks ``cp --reflink=auto -a`` first: on filesystems with copy-on-write (btrfs, XFS
with reflink, overlayfs on those) the copy shares blocks and costs almost nothing; elsewhere it is
a plain copy that keeps modes, times and symlinks as symlinks. Without GNU ``cp`` it falls back to
``shutil.copytree`` (which uses ``copy_file_range`` where the kernel has it). The copy is made
under a temporary name and renamed into place, so a failed clone leaves no half-made workspace.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
from pathlib import Path

import anyio

from runtime.errors import ConflictError, InvalidInputError
from runtime.sandbox.base import SandboxError


class WorkspaceExistsError(SandboxError, ConflictError):
    """A clone target that already exists."""


def _copy_blocking(src: Path, dst: Path, label: str) -> str:
    """Copy ``src`` to ``dst`` (which must not exist); return the method used."""
    if dst.exists():
        raise WorkspaceExistsError(f"workspace {label!r} already exists; choose a new name or destroy it first")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.parent / f".{dst.name}.clone-{os.urandom(4).hex()}"
    try:
        method = "cp --reflink=auto"
        cp = shutil.which("cp")
        done = False
        if cp is not None:
            proc = subprocess.run(
                [cp, "--reflink=auto", "-a", "--", str(src), str(tmp)], capture_output=True, check=False
            )
            done = proc.returncode == 0
            if not done:
                shutil.rmtree(tmp, ignore_errors=True)
        if not done:
            method = "copytree"
            shutil.copytree(src, tmp, symlinks=True)
        os.rename(tmp, dst)
        return method
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


async def copy_tree(src: Path, dst: Path, *, label: str) -> str:
    """Copy a workspace directory; returns ``"cp --reflink=auto"`` or ``"copytree"``."""
    return await anyio.to_thread.run_sync(_copy_blocking, src, dst, label)


async def remove_tree(path: Path) -> None:
    """Remove a workspace directory; a missing one is already removed."""
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(path, ignore_errors=True))


def make_home(home: Path) -> None:
    """Create the home 0700 if it is missing: it holds the workspaces, config.json and the store.

    A home that exists already keeps its mode (it may be a directory the user chose, ``--home .``);
    the directory of workspaces and each workspace in it are 0700 either way (``hand_over``)."""
    if home.exists() and not home.is_dir():  # mkdir would say only "File exists"
        raise InvalidInputError(f"the home {home} is a file, not a directory: give a directory with --home")
    home.mkdir(mode=0o700, parents=True, exist_ok=True)


_SETID = stat.S_ISUID | stat.S_ISGID


def hand_over(workspace: Path, uid: int | None) -> None:
    """Make ``workspace`` 0700 and, for a root server (``uid``: its tool uid), owned by that uid.

    A workspace owned by anyone else (made before commands ran as the tool uid) is handed over
    once, entry by entry: each one is given to ``uid`` and loses any setuid or setgid bit (an old
    workspace may hold a setuid-root file a command made then). The walk never follows a symlink:
    entries are opened with O_NOFOLLOW and changed through their fd."""
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if uid is not None and (st.st_uid, st.st_gid) != (uid, uid):
            _hand_over_tree(fd, uid)
            os.fchown(fd, uid, uid)
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def _hand_over_tree(dir_fd: int, uid: int) -> None:
    for entry in os.scandir(dir_fd):
        try:
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode) or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                os.chown(entry.name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)  # the link, not its target
                continue
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
            fd = os.open(entry.name, flags | (os.O_DIRECTORY if stat.S_ISDIR(st.st_mode) else 0), dir_fd=dir_fd)
        except (FileNotFoundError, NotADirectoryError):
            continue  # gone since the listing: nothing left of it to hand over here
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            continue  # became a symlink since the listing (O_NOFOLLOW): a link carries no mode bits
        try:
            mode = stat.S_IMODE(os.fstat(fd).st_mode)
            if stat.S_ISDIR(st.st_mode):
                _hand_over_tree(fd, uid)
            os.fchown(fd, uid, uid)
            os.fchmod(fd, mode & ~_SETID)  # after the chown, which may itself clear them: never left set
        finally:
            os.close(fd)
