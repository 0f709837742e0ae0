"""Copying and removing workspace directories: the part of forking a session that touches disk.

``copy_tree`` asks ``cp --reflink=auto -a`` first: on filesystems with copy-on-write (btrfs, XFS
with reflink, overlayfs on those) the copy shares blocks and costs almost nothing; elsewhere it is
a plain copy that keeps modes, times and symlinks as symlinks. Without GNU ``cp`` it falls back to
``shutil.copytree`` (which uses ``copy_file_range`` where the kernel has it). The copy is made
under a temporary name and renamed into place, so a failed clone leaves no half-made workspace.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import anyio

from runtime.errors import ConflictError
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
