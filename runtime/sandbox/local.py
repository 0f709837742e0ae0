"""The ``local`` backend: workspaces are directories under a root; commands are local subprocesses.

Confinement, in layers:

- file operations go through ``paths`` (text check, symlink-resolving check, ``O_NOFOLLOW`` walk)
  and ``localfs`` (the workspace size cap);
- commands get a clean environment (``PATH``, ``HOME`` = the workspace, ``LANG``, plus what the
  caller passes), a cwd inside the workspace, a timeout that kills the whole command, capped
  output (``process``), and the resource limits of the policy, set by the launcher (``launcher``);
- with bubblewrap (``--isolation bwrap``, or ``auto`` where it is installed) commands also run
  unprivileged in fresh namespaces (``confine``), reaching the network only through the allow-list
  proxy (``netproxy``). For a root server they run as the dedicated ``HOST_TOOL_UID``, which owns
  the workspaces (0700); the file tools give it what they create (see confine.py for why).
  Without bubblewrap, ``auto`` refuses commands (``IsolationUnavailableError``) and ``none`` runs
  them as plain subprocesses, still limited, in their own session, and killed with every
  descendant; a root server's as ``HOST_TOOL_UID`` too (the launcher drops to it before anything
  else), so no command holds root's powers or leaves a file with them, and under the same seccomp
  filter (the launcher loads it). ``Capabilities.isolation`` says which one you got.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path

import anyio

from runtime.sandbox.base import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_OUTPUT_BYTES,
    Capabilities,
    CommandResult,
    FileEntry,
    IsolationUnavailableError,
    PathEscapeError,
    SandboxError,
    SandboxFileNotFoundError,
    UnsupportedLanguageError,
    check_env,
    check_timeout,
    check_workspace_name,
    command_argv,
)
from runtime.sandbox.cgroup import CgroupRoots, CommandCgroup, find_roots
from runtime.sandbox.confine import (
    HOST_TOOL_UID,
    bwrap_argv,
    detect_limit,
    launcher_argv,
    limit_message,
    proxy_env,
    read_status,
    root_bwrap_problem,
    seccomp_pipe,
)
from runtime.sandbox.localfs import LocalFiles
from runtime.sandbox.policy import SandboxPolicy
from runtime.sandbox.process import run_process
from runtime.sandbox.workspaces import copy_tree, hand_over, remove_tree

_LANG = "C.UTF-8"


@functools.cache
def _python() -> str:
    """The base interpreter (not our virtualenv): sandboxed code sees the stdlib, not our packages."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return str(base) if base.exists() else os.path.realpath(sys.executable)


def _open_to_others(path: str) -> bool:
    """Whether a user with no claim on ``path`` (the tool uid of ``--isolation none`` under a root
    server) can run it: it and every directory on its way, before and after links, open to others."""
    for each in dict.fromkeys((os.path.abspath(path), os.path.realpath(path))):
        for step in [each, *map(str, Path(each).parents)]:
            try:
                if not os.stat(step).st_mode & 0o001:
                    return False
            except OSError:
                return False
    return True


@functools.cache
def _python_for_others() -> str | None:
    """A Python the tool uid can run without bubblewrap: ours when it is reachable (not under a 0700
    ``/root``), else the system's ``python3``; None if neither is."""
    system = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    return next((p for p in (_python(), system) if p is not None and _open_to_others(p)), None)


def _search_path() -> str:
    dirs = [str(Path(_python()).parent), "/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"]
    return ":".join(dict.fromkeys(dirs))


REFUSED = (
    "commands and code need an isolation backend, and none is available here: install bubblewrap "
    "(apt-get install bubblewrap, dnf install bubblewrap, apk add bubblewrap, pacman -S bubblewrap), "
    "or start the server with --isolation none to run them as plain, unisolated subprocesses"
)
# A root server's sandbox is made without a user namespace (confine.py): that takes CAP_SYS_ADMIN.
ROOT_CANNOT = (
    "the server runs as root, and bubblewrap cannot make a sandbox here without a user namespace, which "
    "would leave the commands' files owned by root ({problem}); run the server as an unprivileged user, "
    "give it CAP_SYS_ADMIN, or start it with --isolation none"
)


def refusal() -> str:
    """Why commands are refused (mode ``unavailable``), and what to do about it."""
    problem = root_bwrap_problem() if os.geteuid() == 0 and shutil.which("bwrap") else None
    return REFUSED if problem is None else "commands and code are refused: " + ROOT_CANNOT.format(problem=problem)


class LocalSandbox:
    """One workspace directory, opened, under one policy."""

    backend = "local"

    def __init__(
        self,
        workspace: str,
        root: Path,
        *,
        mode: str,
        policy: SandboxPolicy,
        max_output_bytes: int,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        cgroups: CgroupRoots | None = None,
        tool_uid: int | None = None,
    ) -> None:
        self.workspace = workspace
        self.root = root.resolve()
        self.policy = policy
        self.mode = mode  # "bubblewrap", "none" or "unavailable"
        self._files = LocalFiles(
            self.root,
            workspace,
            max_file_bytes=max_file_bytes,
            max_workspace_bytes=policy.limits.workspace_bytes,
            owner=tool_uid,
        )
        self._max_output = max_output_bytes
        self._max_file = max_file_bytes
        self._cgroups = cgroups
        self._tool_uid = tool_uid  # the host uid commands run as, when it is not the server's (root)
        missing = ("procs", "memory") if cgroups is None else cgroups.missing()
        # RLIMIT_NPROC does not hold for host uid 0 (only a root server's unisolated commands have
        # it); without a memory cgroup, each process is held to the memory limit, not the command.
        unenforced = tuple(name for name in missing if name == "memory" or (os.geteuid() == 0 and tool_uid is None))
        self._interpreter = _python() if tool_uid is None or mode == "bubblewrap" else _python_for_others()
        languages = (["python"] if self._interpreter else []) + ["sh"] + (["bash"] if shutil.which("bash") else [])
        self.capabilities = Capabilities(
            backend="local",
            isolation=mode,
            network=mode == "none",
            max_output_bytes=max_output_bytes,
            languages=tuple(languages),
            limits=policy.limits.describe(),
            allow_net=tuple(str(t) for t in policy.allow_net) if mode == "bubblewrap" else (),
            unenforced=unenforced,
        )

    def with_policy(self, policy: SandboxPolicy) -> LocalSandbox:
        """The same workspace under another policy (a workflow's own limits or allow-list)."""
        if policy == self.policy:
            return self
        return LocalSandbox(
            self.workspace,
            self.root,
            mode=self.mode,
            policy=policy,
            max_output_bytes=self._max_output,
            max_file_bytes=self._max_file,
            cgroups=self._cgroups,
            tool_uid=self._tool_uid,
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
        if self.mode == "unavailable":
            raise IsolationUnavailableError(refusal())
        if "/" not in argv[0] and shutil.which(argv[0], path=full_env["PATH"]) is None:
            # Same answer with or without bwrap (bwrap itself would exit 1): the shell's 127.
            return CommandResult(127, "", f"cannot run {argv[0]!r}: command not found\n", False, False, 0.0)
        stdin_bytes = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        async with AsyncExitStack() as stack:
            proxy_socket = await self._network(stack, full_env)
            limits = self.policy.limits
            group = await self._cgroup(stack)
            status_r, status_w = os.pipe()
            stack.callback(os.close, status_r)
            # The filter (no setuid or setgid modes, no mount, ptrace, io_uring ...) holds without
            # isolation too: bubblewrap loads it, or else the launcher does.
            seccomp_fd = seccomp_pipe()
            passed = [status_w] + ([] if seccomp_fd is None else [seccomp_fd])
            full = launcher_argv(
                _python(),
                limits,
                status_w,
                bridge=proxy_socket is not None,
                own_userns=self.mode == "bubblewrap" and self._tool_uid is None,
                pids_cgroup=group is not None and group.pids is not None,
                drop_to=self._tool_uid,
                # Inside bubblewrap the launcher goes to the workspace once it is the tool uid; without
                # it the command starts there (as root), since no path through root's 0700 home opens
                # for the tool uid: it works in its workspace by relative paths.
                cwd=workdir if self._tool_uid is not None and self.mode == "bubblewrap" else None,
                seccomp_fd=None if self.mode == "bubblewrap" else seccomp_fd,
            )
            full += argv
            if self.mode == "bubblewrap":
                full = (
                    bwrap_argv(
                        self.root,
                        workdir,
                        limits,
                        proxy_socket=proxy_socket,
                        seccomp_fd=seccomp_fd,
                        as_root=self._tool_uid is not None,
                    )
                    + full
                )
            if group is not None:
                full = group.enter_argv(full)
            try:
                result = await run_process(
                    full,
                    cwd=str(workdir),
                    env=full_env,
                    stdin=stdin_bytes,
                    timeout_s=timeout_s,
                    max_output_bytes=self._max_output,
                    pass_fds=passed,
                    graceful_kill=self.mode == "none",
                )
            except (FileNotFoundError, PermissionError) as exc:
                return CommandResult(127, "", f"cannot run {argv[0]!r}: {exc.strerror}\n", False, False, 0.0)
            status = read_status(status_r)
            limit = None if result.timed_out else detect_limit(status, result.exit_code, result.stderr, limits)
            hit = None if group is None else group.hit_limit()
            limit = hit or limit  # a cgroup's counters are sure; the status and messages only hint
        if limit is None and await anyio.to_thread.run_sync(self._files.over_cap):
            limit = "workspace"
        if limit is None:
            return result
        return replace(result, stderr=result.stderr + limit_message(limit, limits), limit=limit)

    async def _network(self, stack: AsyncExitStack, env: dict[str, str]) -> str | None:
        """Start the allow-list proxy for one command (bubblewrap only); its host socket path."""
        if self.mode != "bubblewrap" or not self.policy.allow_net:
            return None
        from runtime.sandbox.netproxy import filtering_proxy  # only with --allow-net: kept off the cold start

        directory = tempfile.mkdtemp(prefix="rath-net-")
        stack.callback(shutil.rmtree, directory, True)
        path = os.path.join(directory, "proxy.sock")
        await stack.enter_async_context(filtering_proxy(path, self.policy.allows, label=f"workspace {self.workspace}"))
        if self._tool_uid is not None:  # the launcher connects to it after giving up root
            os.chown(path, self._tool_uid, self._tool_uid)
        env.update(proxy_env())
        return path

    async def _cgroup(self, stack: AsyncExitStack) -> CommandCgroup | None:
        if self._cgroups is None:
            return None
        roots, limits = self._cgroups, self.policy.limits

        async def remove(group: CommandCgroup) -> None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(group.destroy)

        with anyio.CancelScope(shield=True):  # made and registered for removal as one step, even if cancelled
            group = await anyio.to_thread.run_sync(CommandCgroup, roots, limits.procs, limits.memory_bytes)
            stack.push_async_callback(remove, group)
        return group

    async def run_code(self, code: str, *, language: str = "python", timeout_s: float = 30.0) -> CommandResult:
        interpreters = {"python": [self._interpreter or _python(), "-"], "sh": ["sh", "-s"], "bash": ["bash", "-s"]}
        if language not in interpreters or language not in self.capabilities.languages:
            raise UnsupportedLanguageError(
                f"language {language!r} is not available here; choose one of {', '.join(self.capabilities.languages)}"
            )
        # The code goes in on stdin: nothing is written to the workspace, and no argv size limit applies.
        return await self.run_command(interpreters[language], stdin=code, timeout_s=timeout_s)

    async def close(self) -> None:
        """Nothing to release: the workspace lives on disk until the backend destroys it."""


def resolve_isolation(isolation: str) -> str:
    """``auto``/``bwrap``/``none`` -> the mode commands run in: ``bubblewrap``, ``none`` or ``unavailable``."""
    available = shutil.which("bwrap") is not None
    if isolation == "bwrap" and not available:
        raise SandboxError(
            "--isolation bwrap but bubblewrap is not installed; install it (apt-get install bubblewrap) "
            "or choose --isolation auto or none"
        )
    if isolation == "none":
        return "none"
    if available and os.geteuid() == 0 and (problem := root_bwrap_problem()) is not None:
        if isolation == "bwrap":
            raise SandboxError("--isolation bwrap cannot be honoured: " + ROOT_CANNOT.format(problem=problem))
        return "unavailable"
    return "bubblewrap" if available else "unavailable"


class LocalBackend:
    """Workspaces as directories under ``root``; see the module docstring for the isolation model.

    ``use_bwrap`` (True/False) is shorthand for ``isolation="bwrap"``/``"none"``."""

    name = "local"

    def __init__(
        self,
        root: Path,
        *,
        use_bwrap: bool | None = None,
        policy: SandboxPolicy | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        self.root = Path(root)
        self.policy = policy or SandboxPolicy()
        isolation = self.policy.isolation if use_bwrap is None else ("bwrap" if use_bwrap else "none")
        self.mode = resolve_isolation(isolation)
        self.use_bwrap = self.mode == "bubblewrap"
        self.max_output_bytes = max_output_bytes
        self.max_file_bytes = max_file_bytes
        # Processes and memory are limited per command by cgroup where one can be made (cgroup.py).
        self.cgroups = find_roots() if self.mode != "unavailable" else None
        # A root server's commands run as a dedicated unprivileged uid, which owns the workspaces.
        # With --isolation none too: no command, isolated or not, holds root's powers (docs/sandbox.md).
        self.tool_uid = HOST_TOOL_UID if os.geteuid() == 0 and self.mode != "unavailable" else None

    def path_of(self, workspace: str) -> Path:
        return self.root / check_workspace_name(workspace)

    async def open(self, workspace: str) -> LocalSandbox:
        path = self.path_of(workspace)
        if path.is_symlink():  # a workspace replaced by a link would move the sandbox's root anywhere
            raise PathEscapeError(f"workspace {workspace!r} is a symlink on disk; refusing to open it")
        await anyio.to_thread.run_sync(self._make, path)
        return LocalSandbox(
            workspace,
            path,
            mode=self.mode,
            policy=self.policy,
            max_output_bytes=self.max_output_bytes,
            max_file_bytes=self.max_file_bytes,
            cgroups=self.cgroups,
            tool_uid=self.tool_uid,
        )

    def _make(self, path: Path) -> None:
        """The workspace directory, 0700 (as is the directory of workspaces), owned by the tool uid if any."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        hand_over(path, self.tool_uid)

    async def clone(self, src_workspace: str, dst_workspace: str) -> None:
        src, dst = self.path_of(src_workspace), self.path_of(dst_workspace)
        if not src.is_dir():
            raise SandboxFileNotFoundError(
                f"workspace {src_workspace!r} does not exist; open it first (or clone another workspace)"
            )
        await copy_tree(src, dst, label=dst_workspace)
        await anyio.to_thread.run_sync(hand_over, dst, self.tool_uid)

    async def destroy(self, workspace: str) -> None:
        await remove_tree(self.path_of(workspace))
