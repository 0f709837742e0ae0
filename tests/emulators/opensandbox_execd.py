"""The execd half of the OpenSandbox emulator: commands (SSE) and files, inside one sandbox dir.

See ``opensandbox_server`` for the overall picture. The wire shapes follow execd: SSE frames are a
bare JSON object followed by a blank line; a non-zero exit is an ``error`` event with
``ename=CommandExecError`` and the exit code as ``evalue``; a killed command reports ``-1``.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import os
import shutil
import signal
import stat
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

if TYPE_CHECKING:
    from tests.emulators.opensandbox_server import Emulator, SandboxState


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status_code=status)


class PathRefused(Exception):
    pass


def host_path(sandbox: SandboxState, path: str) -> Path:
    """Map an absolute container path onto the sandbox dir, refusing anything that resolves outside it."""
    if not path:
        raise PathRefused("missing query parameter 'path'")
    root = sandbox.root.resolve()
    candidate = (root / path.lstrip("/")).resolve()
    if candidate != root and not candidate.is_relative_to(root):
        raise PathRefused(f"path {path!r} is outside the sandbox filesystem")
    return candidate


def container_path(sandbox: SandboxState, path: Path) -> str:
    return "/" + str(path.relative_to(sandbox.root.resolve()))


def file_info(sandbox: SandboxState, path: Path) -> dict[str, Any]:
    st = path.lstat()
    kind = (
        "symlink"
        if stat.S_ISLNK(st.st_mode)
        else "directory"
        if stat.S_ISDIR(st.st_mode)
        else "file"
        if stat.S_ISREG(st.st_mode)
        else "other"
    )
    stamp = datetime.fromtimestamp(st.st_mtime, UTC).isoformat()
    return {
        "path": container_path(sandbox, path),
        "type": kind,
        "size": st.st_size,
        "modified_at": stamp,
        "created_at": stamp,
        "owner": str(st.st_uid),
        "group": str(st.st_gid),
        "mode": int(oct(st.st_mode & 0o777)[2:]),
    }


def _frame(kind: str, **fields: Any) -> bytes:
    event = {"type": kind, "timestamp": int(time.time() * 1000), **fields}
    return json.dumps(event).encode() + b"\n\n"


async def _pump(stream: asyncio.StreamReader, kind: str, queue: asyncio.Queue[tuple[str, str] | None]) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := await stream.read(65536):
        text = decoder.decode(chunk)
        if text:
            await queue.put((kind, text))
    tail = decoder.decode(b"", final=True)
    if tail:
        await queue.put((kind, tail))
    await queue.put(None)


#: Fault injection, by workspace name: in a sandbox whose name starts with ``full-disk``, unpacking a tar
#: fails as on a full disk; one whose name starts with ``slow-start`` never answers its readiness ping.
FULL_DISK_PREFIX = "full-disk"
SLOW_START_PREFIX = "slow-start"


def _workspace(sandbox: SandboxState) -> str:
    return next((v for k, v in sandbox.metadata.items() if k.endswith("workspace")), "")


async def _start(sandbox: SandboxState, body: dict[str, Any]) -> asyncio.subprocess.Process:
    argv = ["sh", "-c", body["command"]] if body.get("command") else list(body["argv"])
    if _workspace(sandbox).startswith(FULL_DISK_PREFIX) and "tar -x" in " ".join(argv):
        argv = ["sh", "-c", "echo 'tar: ./big.bin: Cannot write: No space left on device' >&2; exit 2"]
    cwd = host_path(sandbox, body.get("cwd") or "/workspace")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(sandbox.root / "workspace"), "LANG": "C.UTF-8"}
    env.update({str(k): str(v) for k, v in (body.get("envs") or {}).items()})
    return await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )


def _killer(proc: asyncio.subprocess.Process) -> Callable[[], None]:
    def kill() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    return kill


async def _stream_command(
    sandbox: SandboxState, proc: asyncio.subprocess.Process, timeout_ms: int
) -> AsyncIterator[bytes]:
    exec_id = uuid.uuid4().hex
    kill = _killer(proc)
    sandbox.running[exec_id] = kill
    started = time.monotonic()
    deadline = started + timeout_ms / 1000 if timeout_ms else None
    queue: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue(maxsize=8)  # backpressure onto the pipes
    assert proc.stdout is not None and proc.stderr is not None
    pumps = [
        asyncio.ensure_future(_pump(proc.stdout, "stdout", queue)),
        asyncio.ensure_future(_pump(proc.stderr, "stderr", queue)),
    ]
    killed = False
    try:
        yield _frame("init", text=exec_id)
        open_streams = 2
        while open_streams:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                item = await asyncio.wait_for(queue.get(), timeout=wait)
            except TimeoutError:
                kill()
                killed, deadline = True, None
                continue
            if item is None:
                open_streams -= 1
            else:
                yield _frame(item[0], text=item[1])
        code = await proc.wait()
        elapsed = int((time.monotonic() - started) * 1000)
        if code == 0 and not killed:
            yield _frame("execution_complete", execution_time=elapsed)
        else:
            value, trace = ("-1", "signal: killed") if killed or code < 0 else (str(code), f"exit status {code}")
            yield _frame("error", error={"ename": "CommandExecError", "evalue": value, "traceback": [trace]})
    finally:
        sandbox.running.pop(exec_id, None)
        kill()  # the command's background children die with it; also on client disconnect
        for pump in pumps:
            pump.cancel()
        with contextlib.suppress(ProcessLookupError):
            await proc.wait()


def execd_routes(emu: Emulator) -> list[Route]:
    def handler(fn: Callable[[Request, SandboxState], Any]) -> Callable[[Request], Any]:
        async def wrapper(request: Request) -> Response:
            found = emu.execd_sandbox(request)
            if isinstance(found, Response):
                return found
            try:
                result: Response = await fn(request, found)
                return result
            except PathRefused as exc:
                return _error(400, "INVALID_REQUEST", str(exc))

        return wrapper

    async def ping(request: Request, sandbox: SandboxState) -> Response:
        if _workspace(sandbox).startswith(SLOW_START_PREFIX):  # never ready: a start the caller gives up on
            await asyncio.sleep(0.2)
            return Response(status_code=503)
        return Response(status_code=200)

    async def command(request: Request, sandbox: SandboxState) -> Response:
        body = await request.json()
        if bool(body.get("command")) == bool(body.get("argv")):
            return _error(400, "INVALID_REQUEST", "exactly one of non-empty command or argv is required")
        try:
            proc = await _start(sandbox, body)
        except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
            # execd reports a launch failure in-stream: init, then an error whose evalue is the message.
            message = f"fork/exec {body['argv'][0] if body.get('argv') else 'sh'}: {exc.strerror}"
            failure = {"ename": "CommandExecError", "evalue": message, "traceback": [message]}
            frames = _frame("init", text=uuid.uuid4().hex) + _frame("error", error=failure)
            return Response(frames, media_type="text/event-stream")
        stream = _stream_command(sandbox, proc, int(body.get("timeout") or 0))
        return StreamingResponse(stream, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    async def interrupt(request: Request, sandbox: SandboxState) -> Response:
        kill = sandbox.running.get(request.query_params.get("id", ""))
        if kill is None:
            return _error(404, "COMMAND_NOT_FOUND", "no such running command")
        kill()
        return Response(status_code=200)

    async def upload(request: Request, sandbox: SandboxState) -> Response:
        form = await request.form()
        metas, files = form.getlist("metadata"), form.getlist("file")
        if not metas or len(metas) != len(files):
            return _error(400, "INVALID_FILE", "metadata and file parts must come in pairs")
        for meta_part, file_part in zip(metas, files, strict=True):
            raw = await meta_part.read() if isinstance(meta_part, UploadFile) else meta_part.encode()
            meta = json.loads(raw)
            target = host_path(sandbox, meta.get("path", ""))
            target.parent.mkdir(parents=True, exist_ok=True)
            data = await file_part.read() if isinstance(file_part, UploadFile) else file_part.encode()
            if target.is_dir():
                return _error(500, "RUNTIME_ERROR", f"error opening destination file {meta['path']}: is a directory")
            target.write_bytes(data)
            if meta.get("mode"):
                target.chmod(int(str(meta["mode"]), 8))
        return Response(status_code=200)

    async def download(request: Request, sandbox: SandboxState) -> Response:
        path = host_path(sandbox, request.query_params.get("path", ""))
        if not path.exists():
            return _error(404, "FILE_NOT_FOUND", f"file not found. {request.query_params['path']}")
        if not path.is_file():
            return _error(400, "INVALID_REQUEST", f"path is not a file: {request.query_params['path']}")
        return Response(path.read_bytes(), media_type="application/octet-stream")

    async def info(request: Request, sandbox: SandboxState) -> Response:
        result = {}
        for raw in request.query_params.getlist("path"):
            path = host_path(sandbox, raw)
            if not path.exists() and not path.is_symlink():
                return _error(404, "FILE_NOT_FOUND", f"file not found. {raw}")
            result[raw] = file_info(sandbox, path)
        return JSONResponse(result)

    async def list_dir(request: Request, sandbox: SandboxState) -> Response:
        path = host_path(sandbox, request.query_params.get("path", ""))
        depth = int(request.query_params.get("depth", "1"))
        if not path.exists():
            return _error(404, "FILE_NOT_FOUND", f"file not found. {request.query_params['path']}")
        if not path.is_dir():
            return _error(400, "INVALID_REQUEST", f"path is not a directory: {request.query_params['path']}")
        entries: list[dict[str, Any]] = []

        def walk(directory: Path, level: int) -> None:
            for child in directory.iterdir():
                entries.append(file_info(sandbox, child))
                if child.is_dir() and not child.is_symlink() and level + 1 < depth:
                    walk(child, level + 1)

        if depth > 0:
            walk(path, 0)
        return JSONResponse(entries)

    async def remove_files(request: Request, sandbox: SandboxState) -> Response:
        for raw in request.query_params.getlist("path"):
            with contextlib.suppress(FileNotFoundError):
                host_path(sandbox, raw).unlink()
        return Response(status_code=200)

    async def make_dirs(request: Request, sandbox: SandboxState) -> Response:
        for raw in await request.json():
            host_path(sandbox, raw).mkdir(parents=True, exist_ok=True)
        return Response(status_code=200)

    async def remove_dirs(request: Request, sandbox: SandboxState) -> Response:
        for raw in request.query_params.getlist("path"):
            shutil.rmtree(host_path(sandbox, raw), ignore_errors=True)
        return Response(status_code=200)

    prefix = "/execd/{sid}"
    table: list[tuple[str, Callable[[Request, SandboxState], Any], str]] = [
        ("/ping", ping, "GET"),
        ("/command", command, "POST"),
        ("/command", interrupt, "DELETE"),
        ("/files/upload", upload, "POST"),
        ("/files/download", download, "GET"),
        ("/files/info", info, "GET"),
        ("/files", remove_files, "DELETE"),
        ("/directories/list", list_dir, "GET"),
        ("/directories", make_dirs, "POST"),
        ("/directories", remove_dirs, "DELETE"),
    ]
    return [Route(prefix + path, handler(fn), methods=[method]) for path, fn, method in table]
