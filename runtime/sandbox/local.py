"""The ``local`` backend: workspaces are directories under a root; commands are local subprocesses.

Confinement, in layers:

- file operations go through ``paths`` (text check, symlink-resolving check, ``O_NOFOLLOW`` walk);
- commands get a clean environment (``PATH``, ``HOME`` = the workspace, ``LANG``, plus what the
  caller passes), a cwd inside the workspace, a timeout that kills the process group and capped
  output (``process``);
- when ``bwrap`` (bubblewrap) is installed, commands also run in fresh namespaces: the system
  directories and a few ``/etc`` entries read-only (nothing else of the host: no ``/home``,
  ``/root``, ``/var``, no other workspace), the workspace the only writable place, a private
  ``/tmp``, no network, no view of other processes. ``Capabilities.isolation`` says which of the two you got.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

import anyio

from runtime.sandbox.base import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_OUTPUT_BYTES,
    Capabilities,
    CommandResult,
    FileEntry,
    PathEscapeError,
    SandboxError,
    SandboxFileNotFoundError,
    UnsupportedLanguageError,
    check_env,
    check_timeout,
    check_workspace_name,
    command_argv,
)
from runtime.sandbox.localfs import LocalFiles
from runtime.sandbox.process import run_process
from runtime.sandbox.workspaces import copy_tree, remove_tree

# Read-only system directories a sandboxed command may see (when they exist).
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Only the parts of /etc that programs need to run: the rest (pip.conf, npmrc, database configs,
# gitconfig, ...) can hold credentials and stays hidden.
_ETC_ENTRIES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "localtime",
    "timezone",
    "ssl",
    "ca-certificates",
    "mime.types",
    "os-release",
    "debian_version",
    "protocols",
    "services",
    "locale.alias",
)
_LANG = "C.UTF-8"


@functools.cache
def _python() -> str:
    """The base interpreter (not our virtualenv): sandboxed code sees the stdlib, not our packages."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return str(base) if base.exists() else os.path.realpath(sys.executable)


def _search_path() -> str:
    dirs = [str(Path(_python()).parent), "/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"]
    return ":".join(dict.fromkeys(dirs))


class LocalSandbox:
    """One workspace directory, opened."""

    backend = "local"

    def __init__(
        self,
        workspace: str,
        root: Path,
        *,
        use_bwrap: bool,
        max_output_bytes: int,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        self.workspace = workspace
        self.root = root.resolve()
        self._files = LocalFiles(self.root, workspace, max_file_bytes=max_file_bytes)
        self._use_bwrap = use_bwrap
        self._max_output = max_output_bytes
        languages = ["python", "sh"] + (["bash"] if shutil.which("bash") else [])
        self.capabilities = Capabilities(
            backend="local",
            isolation="bubblewrap" if use_bwrap else "none",
            network=not use_bwrap,
            max_output_bytes=max_output_bytes,
            languages=tuple(languages),
        )

    async def read_file(self, path: str) -> bytes:
        return await anyio.to_thread.run_sync(self._files.read, path)

    async def write_file(self, path: str, data: bytes | str) -> None:
        await anyio.to_thread.run_sync(self._files.write, path, data)

    async def list_dir(self, path: str = ".") -> list[FileEntry]:
        return await anyio.to_thread.run_sync(self._files.list, path)

    async def exists(self, path: str) -> bool:
        return await anyio.to_thread.run_sync(self._files.exists, path)

    async def run_command(
        self,
        command: str | list[str],
        *,
        stdin: bytes | str | None = None,
        env: dict[str, str] | None = None,
        timeout_s: float = 30.0,
        cwd: str = ".",
    ) -> CommandResult:
        argv = command_argv(command)
        timeout_s = check_timeout(timeout_s)
        workdir = await anyio.to_thread.run_sync(self._files.directory, cwd)
        full_env = {"PATH": _search_path(), "HOME": str(self.root), "LANG": _LANG, "LC_ALL": _LANG}
        full_env.update(check_env(env))
        if "/" not in argv[0] and shutil.which(argv[0], path=full_env["PATH"]) is None:
            # Same answer with or without bwrap (bwrap itself would exit 1): the shell's 127.
            return CommandResult(127, "", f"cannot run {argv[0]!r}: command not found\n", False, False, 0.0)
        if self._use_bwrap:
            argv = self._bwrap_prefix(workdir) + argv
        stdin_bytes = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        try:
            return await run_process(
                argv,
                cwd=str(workdir),
                env=full_env,
                stdin=stdin_bytes,
                timeout_s=timeout_s,
                max_output_bytes=self._max_output,
            )
        except (FileNotFoundError, PermissionError) as exc:
            return CommandResult(127, "", f"cannot run {argv[0]!r}: {exc.strerror}\n", False, False, 0.0)

    async def run_code(self, code: str, *, language: str = "python", timeout_s: float = 30.0) -> CommandResult:
        interpreters = {"python": [_python(), "-"], "sh": ["sh", "-s"], "bash": ["bash", "-s"]}
        if language not in interpreters or language not in self.capabilities.languages:
            raise UnsupportedLanguageError(
                f"language {language!r} is not available here; choose one of {', '.join(self.capabilities.languages)}"
            )
        # The code goes in on stdin: nothing is written to the workspace, and no argv size limit applies.
        return await self.run_command(interpreters[language], stdin=code, timeout_s=timeout_s)

    async def close(self) -> None:
        """Nothing to release: the workspace lives on disk until the backend destroys it."""

    def _bwrap_prefix(self, workdir: Path) -> list[str]:
        root = str(self.root)
        args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session"]
        for directory in _SYSTEM_DIRS:
            if os.path.isdir(directory):
                args += ["--ro-bind", directory, directory]
        for entry in _ETC_ENTRIES:
            path = f"/etc/{entry}"
            if os.path.lexists(path):
                args += ["--ro-bind", path, path]
        prefix = sys.base_prefix
        if not any(prefix == d or prefix.startswith(d + "/") for d in _SYSTEM_DIRS):
            args += ["--ro-bind", prefix, prefix]
        args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--bind", root, root]
        # bwrap's own root is a tmpfs; make it read-only too, so /tmp and the workspace are the only writable places.
        args += ["--remount-ro", "/", "--chdir", str(workdir)]
        return [*args, "--"]


class LocalBackend:
    """Workspaces as directories under ``root``; see the module docstring for the isolation model."""

    name = "local"

    def __init__(
        self,
        root: Path,
        *,
        use_bwrap: bool | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        self.root = Path(root)
        available = shutil.which("bwrap") is not None
        if use_bwrap and not available:
            raise SandboxError("use_bwrap=True but bubblewrap is not installed; install it: apt-get install bubblewrap")
        self.use_bwrap = available if use_bwrap is None else use_bwrap
        self.max_output_bytes = max_output_bytes
        self.max_file_bytes = max_file_bytes

    def path_of(self, workspace: str) -> Path:
        return self.root / check_workspace_name(workspace)

    async def open(self, workspace: str) -> LocalSandbox:
        path = self.path_of(workspace)
        if path.is_symlink():  # a workspace replaced by a link would move the sandbox's root anywhere
            raise PathEscapeError(f"workspace {workspace!r} is a symlink on disk; refusing to open it")
        await anyio.to_thread.run_sync(lambda: path.mkdir(parents=True, exist_ok=True))
        return LocalSandbox(
            workspace,
            path,
            use_bwrap=self.use_bwrap,
            max_output_bytes=self.max_output_bytes,
            max_file_bytes=self.max_file_bytes,
        )

    async def clone(self, src_workspace: str, dst_workspace: str) -> None:
        src, dst = self.path_of(src_workspace), self.path_of(dst_workspace)
        if not src.is_dir():
            raise SandboxFileNotFoundError(
                f"workspace {src_workspace!r} does not exist; open it first (or clone another workspace)"
            )
        await copy_tree(src, dst, label=dst_workspace)

    async def destroy(self, workspace: str) -> None:
        await remove_tree(self.path_of(workspace))
