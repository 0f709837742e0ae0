"""One OpenSandbox sandbox seen through our ``Sandbox`` protocol (the SDK does the talking).

Workspace paths map onto ``root_dir`` inside the container (``/workspace`` by default). Paths are
checked as text (no absolute paths, no ``..`` out) before anything is sent; the container itself is
the isolation boundary, so a symlink inside it can only reach the container's own filesystem.

execd has no stdin for commands, so stdin is uploaded to a hidden file in the workspace and
redirected from it (its path is given relative to the command's cwd, which keeps the wrapper
independent of where the container mounts things); the file is removed afterwards.

Every command runs under ``ulimit`` (CPU seconds, file size, address space and processes of the
policy), set by ``sh`` in the container before it ``exec``s the command; a command that ran into one
gets ``CommandResult.limit`` and a line on stderr, as with the local backend.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any, TypeVar

import anyio
from opensandbox import Sandbox as SdkSandbox
from opensandbox.exceptions import SandboxApiException, SandboxException
from opensandbox.models.execd import ExecutionHandlers, RunCommandOpts
from opensandbox.models.filesystem import DirectoryListEntry

from runtime.sandbox.base import (
    DEFAULT_MAX_FILE_BYTES,
    BackendUnavailableError,
    Capabilities,
    CommandResult,
    FileEntry,
    NotAFileError,
    SandboxError,
    SandboxFileNotFoundError,
    UnsupportedLanguageError,
    check_env,
    check_timeout,
    command_argv,
    to_bytes,
    too_large,
)
from runtime.sandbox.confine import detect_limit, limit_message
from runtime.sandbox.paths import relative_parts
from runtime.sandbox.policy import SandboxPolicy
from runtime.sandbox.process import TIMEOUT_EXIT_CODE, truncation_marker

HIDDEN_PREFIX = ".rath-"
_CLIENT_GRACE_S = 5.0  # the server enforces the timeout; the client waits this much longer, then interrupts
_T = TypeVar("_T")


class _Drop404(logging.Filter):
    """Drops the SDK's ERROR-with-traceback records for 404s: to us a missing file is an answer, not a fault."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        status = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
        return status != 404


def quiet_expected_404s() -> None:
    """Install the filter once on the SDK's filesystem logger (idempotent)."""
    sdk_logger = logging.getLogger("opensandbox.adapters.filesystem_adapter")
    if not any(isinstance(f, _Drop404) for f in sdk_logger.filters):
        sdk_logger.addFilter(_Drop404())


def translate(exc: SandboxException, what: str) -> SandboxError:
    """An SDK error as one of ours; the message names the operation and never carries credentials."""
    status = exc.status_code if isinstance(exc, SandboxApiException) else None
    if status == 404:
        return SandboxFileNotFoundError(f"{what}: not found")
    if status is None or status in (401, 403) or status >= 500:
        detail = f"HTTP {status}" if status else type(exc).__name__
        return BackendUnavailableError(f"{what} failed on the opensandbox server ({detail}); check domain and api key")
    return SandboxError(f"{what} was refused by the opensandbox server (HTTP {status})")


class _Capped:
    """Text from a stream, kept up to ``limit`` UTF-8 bytes."""

    def __init__(self, limit: int) -> None:
        self.limit, self.parts, self.size, self.dropped = limit, list[str](), 0, 0

    async def add(self, message: Any) -> None:
        data = str(message.text).encode("utf-8")
        room = self.limit - self.size
        if room > 0:
            kept = data[:room]
            self.parts.append(kept.decode("utf-8", errors="ignore"))
            self.size += len(kept)
        self.dropped += max(0, len(data) - max(room, 0))

    def text(self) -> str:
        return "".join(self.parts) + (truncation_marker(self.limit) if self.dropped else "")


class OpenSandboxSandbox:
    """A workspace living in an OpenSandbox container."""

    backend = "opensandbox"

    def __init__(
        self,
        workspace: str,
        sdk: SdkSandbox,
        *,
        root_dir: str,
        max_output_bytes: int,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        policy: SandboxPolicy | None = None,
    ) -> None:
        self.workspace = workspace
        self.sdk = sdk
        self.policy = policy or SandboxPolicy()
        self.max_file_bytes = max_file_bytes
        quiet_expected_404s()
        self.root_dir = root_dir
        self._max_output = max_output_bytes
        self.capabilities = Capabilities(
            backend="opensandbox",
            isolation="container",
            network=bool(self.policy.allow_net),
            max_output_bytes=max_output_bytes,
            languages=("python", "sh", "bash"),
            limits=self.policy.limits.describe(),
            allow_net=tuple(dict.fromkeys(t.host for t in self.policy.allow_net)),
        )

    def _limited(self, argv: list[str]) -> list[str]:
        """``argv`` under the policy's ulimits (dash calls the process limit -p, bash -u)."""
        lim = self.policy.limits
        script = (
            f"ulimit -t {lim.cpu_s} && ulimit -f {lim.file_size_bytes // 512} && "
            f"ulimit -v {lim.memory_bytes // 1024} && "
            f"{{ ulimit -u {lim.procs} 2>/dev/null || ulimit -p {lim.procs} 2>/dev/null; }}; "
            'exec "$@"'
        )
        return ["sh", "-c", script, "sh", *argv]

    def _abs(self, path: str) -> str:
        return posixpath.join(self.root_dir, *relative_parts(path))

    async def _call(self, what: str, fn: Callable[[], Awaitable[_T]]) -> _T:
        try:
            return await fn()
        except SandboxException as exc:
            raise translate(exc, what) from exc

    async def _info(self, path: str) -> tuple[str, int] | None:
        """(kind, size) with kind 'file', 'directory', ...; None when missing."""
        target = self._abs(path)
        try:
            info = await self.sdk.files.get_file_info([target])
        except SandboxApiException as exc:
            if exc.status_code == 404:
                return None
            raise translate(exc, f"stat {path!r}") from exc
        entry = info.get(target)
        return None if entry is None else (str(entry.entry_type or "file"), int(entry.size))

    async def _kind(self, path: str) -> str | None:
        info = await self._info(path)
        return None if info is None else info[0]

    async def read_file(self, path: str) -> bytes:
        """One stat (kind and size, so a huge file is refused before it is sent), then the download."""
        info = await self._info(path)
        if info is None:
            raise SandboxFileNotFoundError(
                f"no such file {path!r} in workspace {self.workspace!r}; list_dir('.') shows what exists"
            )
        kind, size = info
        if kind == "directory":
            raise NotAFileError(f"{path!r} is a directory; use list_dir({path!r}) to see its entries")
        if size > self.max_file_bytes:
            raise too_large(path, size, self.max_file_bytes)
        return await self._call(f"read {path!r}", lambda: self.sdk.files.read_bytes(self._abs(path)))

    async def write_file(self, path: str, data: bytes | str) -> None:
        payload = to_bytes(data)
        if not relative_parts(path):
            raise NotAFileError("'.' is the workspace directory; write to a file in it, e.g. 'notes.txt'")
        try:
            await self.sdk.files.write_file(self._abs(path), payload or b"", mode=644)
        except SandboxException as exc:
            if await self._kind(path) == "directory":
                raise NotAFileError(f"{path!r} is a directory; choose a file path") from exc
            raise translate(exc, f"write {path!r}") from exc

    async def list_dir(self, path: str = ".") -> list[FileEntry]:
        parts = relative_parts(path)
        try:
            infos = await self.sdk.files.list_directory(DirectoryListEntry(path=self._abs(path), depth=1))
        except SandboxException as exc:
            kind = await self._kind(path)
            if kind is None:
                raise SandboxFileNotFoundError(f"no such directory {path!r} in workspace {self.workspace!r}") from exc
            if kind != "directory":
                raise NotAFileError(f"{path!r} is a file, not a directory; use read_file({path!r})") from exc
            raise translate(exc, f"list {path!r}") from exc
        entries = []
        for info in infos:
            name = posixpath.basename(info.path.rstrip("/"))
            if not parts and name.startswith(HIDDEN_PREFIX):
                continue  # our own stdin/clone scratch files
            is_dir = info.entry_type == "directory"
            entries.append(FileEntry(name=name, is_dir=is_dir, size=0 if is_dir else int(info.size)))
        return sorted(entries, key=lambda e: e.name)

    async def exists(self, path: str) -> bool:
        return await self._kind(path) is not None

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
        env = check_env(env)
        workdir = self._abs(cwd)
        kind = await self._kind(cwd)
        if kind is None:
            raise SandboxFileNotFoundError(f"cwd {cwd!r} does not exist in workspace {self.workspace!r}")
        if kind != "directory":
            raise NotAFileError(f"cwd {cwd!r} is a file, not a directory; pass a directory as cwd")
        stdin_file = None
        if stdin is not None:
            stdin_file = posixpath.join(self.root_dir, f"{HIDDEN_PREFIX}stdin-{uuid.uuid4().hex}")
            await self._call("upload stdin", lambda: self.sdk.files.write_file(stdin_file, to_bytes(stdin) or b""))
            argv = ["sh", "-c", 'exec "$@" < "$0"', posixpath.relpath(stdin_file, workdir), *argv]
        try:
            result = await self._execute(self._limited(argv), env, timeout_s, workdir)
        finally:
            if stdin_file is not None:
                # Best effort: a leftover scratch file must not turn a finished command into an error.
                with anyio.CancelScope(shield=True), contextlib.suppress(SandboxError):
                    await self._call("remove stdin", lambda: self.sdk.files.delete_files([stdin_file]))
        limits = self.policy.limits
        limit = None if result.timed_out else detect_limit({}, result.exit_code, result.stderr, limits)
        if limit is None:
            return result
        return replace(result, stderr=result.stderr + limit_message(limit, limits), limit=limit)

    async def _execute(self, argv: list[str], env: dict[str, str], timeout_s: float, workdir: str) -> CommandResult:
        out, err = _Capped(self._max_output), _Capped(self._max_output)
        ids: list[str] = []

        async def on_init(event: Any) -> None:
            ids.append(str(event.id))

        handlers = ExecutionHandlers(on_stdout=out.add, on_stderr=err.add, on_init=on_init, skip_accumulation=True)
        opts = RunCommandOpts(working_directory=workdir, timeout=timedelta(seconds=timeout_s), envs=env or None)
        started = time.monotonic()
        execution = None
        with anyio.move_on_after(timeout_s + _CLIENT_GRACE_S) as guard:
            execution = await self._call(
                "run command", lambda: self.sdk.commands.run(argv, opts=opts, handlers=handlers)
            )
        elapsed = time.monotonic() - started
        if guard.cancelled_caught:
            for exec_id in ids:  # the server missed its deadline: stop the command ourselves
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await self._call("interrupt command", lambda i=exec_id: self.sdk.commands.interrupt(i))  # type: ignore[misc]
        code = execution.exit_code if execution is not None and execution.exit_code is not None else TIMEOUT_EXIT_CODE
        timed_out = guard.cancelled_caught or (code == TIMEOUT_EXIT_CODE and elapsed >= timeout_s * 0.95)
        stderr = err.text()
        if execution is not None and execution.exit_code is None and execution.error is not None and not timed_out:
            # execd could not start the program: its error value is a message, not an exit code.
            code, stderr = 127, stderr + f"cannot run {argv[0]!r}: {execution.error.value}\n"
        return CommandResult(
            exit_code=TIMEOUT_EXIT_CODE if timed_out else code,
            stdout=out.text(),
            stderr=stderr,
            timed_out=timed_out,
            truncated=bool(out.dropped or err.dropped),
            duration_s=elapsed,
        )

    async def run_code(self, code: str, *, language: str = "python", timeout_s: float = 30.0) -> CommandResult:
        interpreters = {"python": ["python3", "-"], "sh": ["sh", "-s"], "bash": ["bash", "-s"]}
        if language not in interpreters:
            raise UnsupportedLanguageError(
                f"language {language!r} is not available here; choose one of {', '.join(self.capabilities.languages)}"
            )
        return await self.run_command(interpreters[language], stdin=code, timeout_s=timeout_s)

    async def close(self) -> None:
        """Release local HTTP resources; the container lives on until the backend destroys it."""
        await self.sdk.close()
