"""The sandbox protocol: where an agent's tools read files and run commands.

A ``Backend`` (local, opensandbox, ...) opens named *workspaces*; an opened workspace is a ``Sandbox``.
Every backend honours the same behaviour, which ``tests/sandbox/test_conformance.py`` checks with one
set of test bodies: paths are relative to the workspace and never reach outside it, listings are sorted
by name, a timed-out command is killed and leaves the sandbox usable, and output beyond
``Capabilities.max_output_bytes`` is cut off with ``CommandResult.truncated`` set (the text then ends
with a marker saying so). A missing executable is exit code 127 with a message on stderr; a timeout is
``exit_code == -1`` with ``timed_out``; ``read_file`` refuses files over the backend's
``max_file_bytes`` (``FileTooLargeError``) instead of loading them whole.

Errors are ``SandboxError`` (a ``UsageError``): the caller passed something the sandbox refuses, and
the message says what and how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from runtime.errors import NotFoundError, UsageError

DEFAULT_MAX_OUTPUT_BYTES = 1_000_000
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024  # read_file refuses larger files: they would all land in memory


class SandboxError(UsageError):
    """A sandbox refused a request; the message says what was wrong and how to fix it."""


class PathEscapeError(SandboxError):
    """A path would resolve outside the workspace (``..``, an absolute path, or a symlink pointing out)."""


class SandboxFileNotFoundError(SandboxError, NotFoundError):
    """A file or directory that does not exist in the workspace."""


class NotAFileError(SandboxError):
    """A file operation was asked of a directory (or a directory operation of a file)."""


class FileTooLargeError(SandboxError):
    """``read_file`` of a file larger than the backend's ``max_file_bytes``."""


def too_large(path: str, size: int, limit: int) -> FileTooLargeError:
    return FileTooLargeError(
        f"{path!r} is {size} bytes, more than the {limit}-byte read limit; "
        f"read parts of it with a command instead (e.g. head -c 100000 {path!r}, or sed -n '1,200p')"
    )


class UnsupportedLanguageError(SandboxError):
    """``run_code`` was asked for a language the backend cannot run."""


class InvalidWorkspaceError(SandboxError):
    """A workspace name that is not a plain name (letters, digits, '-', '_', '.')."""


class BackendUnavailableError(SandboxError):
    """The backend cannot be reached or is not configured."""


class IsolationUnavailableError(BackendUnavailableError):
    """Commands were asked for but no isolation backend is available (and ``--isolation none`` was not chosen)."""


class WorkspaceFullError(SandboxError):
    """A write would take the workspace over its size cap."""


@dataclass(frozen=True)
class Capabilities:
    """What a sandbox can do, reported so that agents (and users) know what isolation they get.

    ``isolation`` is ``"bubblewrap"`` (local, namespaced, unprivileged), ``"none"`` (local, plain
    subprocesses confined only by path checks, limits and a clean environment: chosen explicitly),
    ``"unavailable"`` (local, no bubblewrap and no opt-out: commands are refused) or ``"container"``
    (opensandbox).
    """

    backend: str
    isolation: str
    network: bool
    max_output_bytes: int
    languages: tuple[str, ...]
    limits: dict[str, int] | None = None  # ToolLimits.describe(): what commands are held to
    allow_net: tuple[str, ...] = ()  # host:ports reachable through the filtering proxy
    # Limits this host cannot hold: "memory" without a memory cgroup (each process is still held to
    # it alone), "procs" for a root server's unisolated commands without a pids cgroup.
    unenforced: tuple[str, ...] = ()


@dataclass(frozen=True)
class CommandResult:
    """The outcome of a command. ``exit_code`` is -1 when the command was killed on timeout.

    ``limit`` names the resource limit the command ran into (``memory``, ``procs``, ``file_size``,
    ``cpu``, ``workspace``), if any; stderr then ends with a line saying so and how to raise it."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    duration_s: float
    limit: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class FileEntry:
    """One entry of a directory listing."""

    name: str
    is_dir: bool
    size: int


@runtime_checkable
class Sandbox(Protocol):
    """One opened workspace. All paths are relative to the workspace root."""

    backend: str
    workspace: str
    capabilities: Capabilities

    async def read_file(self, path: str) -> bytes: ...

    async def write_file(self, path: str, data: bytes | str) -> None:
        """Write ``data`` (str is UTF-8 encoded), creating parent directories."""
        ...

    async def list_dir(self, path: str = ".") -> list[FileEntry]:
        """Entries of a directory, sorted by name."""
        ...

    async def exists(self, path: str) -> bool: ...

    async def run_command(
        self,
        command: str | list[str],
        *,
        stdin: bytes | str | None = None,
        env: dict[str, str] | None = None,
        timeout_s: float = 30.0,
        cwd: str = ".",
    ) -> CommandResult:
        """Run a command (a str goes through ``sh -c``; a list is exec'd directly)."""
        ...

    async def run_code(self, code: str, *, language: str = "python", timeout_s: float = 30.0) -> CommandResult: ...

    async def close(self) -> None: ...


@runtime_checkable
class Backend(Protocol):
    """A place where workspaces live."""

    name: str

    async def open(self, workspace: str) -> Sandbox:
        """Open ``workspace``, creating it if missing, else attaching to it."""
        ...

    async def clone(self, src_workspace: str, dst_workspace: str) -> None:
        """Copy a workspace (copy-on-write where the filesystem allows it)."""
        ...

    async def destroy(self, workspace: str) -> None: ...


def check_workspace_name(name: str) -> str:
    """Validate a workspace name: it becomes a directory or sandbox label, so it must be a plain name."""
    if (
        not isinstance(name, str)
        or not name
        or len(name) > 128
        or name in (".", "..")
        or not all(c.isascii() and (c.isalnum() or c in "-_.") for c in name)
    ):
        raise InvalidWorkspaceError(
            f"workspace name {name!r} is not valid: use 1-128 letters, digits, '-', '_' or '.' "
            "(no '/', no '..'), e.g. 'default' or 'fork-1'"
        )
    return name


def to_bytes(data: bytes | str | None) -> bytes | None:
    """Text is UTF-8 encoded; bytes pass through."""
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    raise SandboxError(f"expected bytes or str, got {type(data).__name__}; pass the data as bytes or text")


def command_argv(command: str | list[str]) -> list[str]:
    """A command as argv: a string runs through ``sh -c``; a list is exec'd as given."""
    if isinstance(command, str):
        if not command.strip():
            raise SandboxError("command is empty; pass a shell command such as 'ls -la'")
        return ["sh", "-c", command]
    if not command or not all(isinstance(a, str) and "\x00" not in a for a in command) or not command[0]:
        raise SandboxError("command list must be non-empty strings without NUL, e.g. ['python3', 'main.py']")
    return list(command)


def check_timeout(timeout_s: float) -> float:
    if not isinstance(timeout_s, int | float) or timeout_s <= 0:
        raise SandboxError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    return float(timeout_s)


def check_env(env: dict[str, str] | None) -> dict[str, str]:
    """Caller-supplied environment variables, validated (names without '=', no NUL anywhere)."""
    env = dict(env or {})
    for key, value in env.items():
        if not isinstance(key, str) or not key or "=" in key or "\x00" in key:
            raise SandboxError(f"environment variable name {key!r} is not valid: use a non-empty name without '='")
        if not isinstance(value, str) or "\x00" in value:
            raise SandboxError(f"environment variable {key} must be a string without NUL bytes")
    return env
