"""Escape attempts against the ``local`` backend: each one is refused with a clear error.

Symlinks are planted both from outside (as a malicious archive could) and by a command inside the
sandbox; with bubblewrap, commands also cannot see or touch anything beyond the workspace.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from runtime.sandbox import NotAFileError, PathEscapeError, SandboxError
from runtime.sandbox.local import LocalBackend, LocalSandbox
from runtime.sandbox.paths import open_dir_beneath
from tests.sandbox.conftest import needs_bwrap, require_bwrap

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["bwrap", "plain"])
async def local(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LocalSandbox]:
    if request.param == "bwrap":
        require_bwrap()
    backend = LocalBackend(tmp_path / "workspaces", use_bwrap=request.param == "bwrap", max_output_bytes=10_000)
    (tmp_path / "secret.txt").write_text("host secret")
    sandbox = await backend.open("ws")
    yield sandbox
    await sandbox.close()


async def test_a_symlink_pointing_out_is_refused_for_every_operation(local: LocalSandbox, tmp_path: Path) -> None:
    os.symlink("/etc", local.root / "etc-link")
    os.symlink(tmp_path / "secret.txt", local.root / "secret-link")
    for path in ("etc-link/passwd", "secret-link"):
        with pytest.raises(PathEscapeError, match="resolves outside the workspace"):
            await local.read_file(path)
    with pytest.raises(PathEscapeError):
        await local.write_file("etc-link/planted", "x")
    with pytest.raises(PathEscapeError):
        await local.write_file("secret-link", "overwritten?")
    with pytest.raises(PathEscapeError):
        await local.list_dir("etc-link")
    with pytest.raises(PathEscapeError):
        await local.run_command("true", cwd="etc-link")
    assert (tmp_path / "secret.txt").read_text() == "host secret"
    assert not await anyio.Path("/etc/planted").exists()


async def test_a_symlink_made_by_a_command_is_refused_too(local: LocalSandbox) -> None:
    made = await local.run_command("ln -s ../.. up && ln -s /etc/hostname host")
    assert made.ok, made.stderr
    with pytest.raises(PathEscapeError):
        await local.list_dir("up")
    with pytest.raises(PathEscapeError):
        await local.read_file("host")


async def test_a_symlink_that_stays_inside_is_followed(local: LocalSandbox) -> None:
    await local.write_file("real/data.txt", "inside")
    os.symlink("real", local.root / "alias")
    os.symlink("real/data.txt", local.root / "data-link")
    assert await local.read_file("alias/data.txt") == b"inside"
    assert await local.read_file("data-link") == b"inside"
    await local.write_file("data-link", "through the link")
    assert (local.root / "real" / "data.txt").read_text() == "through the link"


async def test_a_symlink_swapped_in_after_the_check_is_not_followed(tmp_path: Path) -> None:
    """The no-follow walk is the second line: it refuses a link even when the text check passed."""
    root = tmp_path / "root"
    (root / "dir").mkdir(parents=True)
    os.symlink(tmp_path, root / "link")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(PathEscapeError, match="symlink"), open_dir_beneath(fd, ("link",)):
            pass
        with open_dir_beneath(fd, ("dir",)) as inner:
            assert os.path.samestat(os.fstat(inner), os.stat(root / "dir"))
    finally:
        os.close(fd)


async def test_reading_a_fifo_is_refused_without_hanging(local: LocalSandbox) -> None:
    os.mkfifo(local.root / "pipe")
    with anyio.fail_after(5), pytest.raises(NotAFileError, match="not a regular file"):
        await local.read_file("pipe")


async def test_huge_output_is_capped_in_memory(local: LocalSandbox) -> None:
    result = await local.run_command("head -c 50000000 /dev/zero", timeout_s=20)
    assert result.truncated and result.ok
    assert len(result.stdout) < 10_000 + 200 and "output truncated" in result.stdout


async def test_a_failed_write_leaves_the_old_content(local: LocalSandbox) -> None:
    await local.write_file("keep.txt", "old")
    with pytest.raises(SandboxError, match="parent"):
        await local.write_file("keep.txt/child", "x")
    assert await local.read_file("keep.txt") == b"old"
    assert sorted(p.name for p in local.root.iterdir()) == ["keep.txt"]  # no temp files left behind


async def test_timeout_kills_background_children(tmp_path: Path) -> None:
    sandbox = await LocalBackend(tmp_path, use_bwrap=False).open("ws")
    result = await sandbox.run_command("sleep 60 & echo $! > child.pid; wait", timeout_s=0.5)
    assert result.timed_out
    pid = int((await sandbox.read_file("child.pid")).decode())
    with anyio.fail_after(5):
        while _alive(pid):  # noqa: ASYNC110 - polling another process's exit; there is no event to wait on
            await anyio.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"  # a zombie is dead, only not yet reaped
    except FileNotFoundError:
        return False


async def test_without_bwrap_commands_get_a_clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
    sandbox = await LocalBackend(tmp_path, use_bwrap=False).open("ws")
    env = dict(line.split("=", 1) for line in (await sandbox.run_command("env")).stdout.splitlines())
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert env["HOME"] == str(sandbox.root) and env["PWD"] == str(sandbox.root)
    assert sandbox.capabilities.isolation == "none" and sandbox.capabilities.network


def test_isolation_is_reported_honestly(tmp_path: Path) -> None:
    auto = LocalBackend(tmp_path)
    assert auto.use_bwrap == (shutil.which("bwrap") is not None)
    if shutil.which("bwrap") is None:
        with pytest.raises(SandboxError, match="bubblewrap is not installed"):
            LocalBackend(tmp_path, use_bwrap=True)


@needs_bwrap
async def test_with_bwrap_only_the_workspace_is_writable_and_the_host_is_hidden(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "workspaces", use_bwrap=True)
    (tmp_path / "workspaces" / "sibling.txt").parent.mkdir(parents=True)
    (tmp_path / "workspaces" / "sibling.txt").write_text("next door")
    sandbox = await backend.open("ws")
    assert sandbox.capabilities.isolation == "bubblewrap" and not sandbox.capabilities.network
    result = await sandbox.run_command(
        "touch /etc/planted 2>/dev/null && echo etc-writable; "
        "cat /etc/shadow >/dev/null 2>&1 && echo shadow-readable; "
        "ls /var /home /root/.ssh >/dev/null 2>&1 && echo host-dirs-visible; "
        "cat ../sibling.txt 2>/dev/null && echo sibling-visible; "
        f"ls {Path.cwd()} >/dev/null 2>&1 && echo repo-visible; "
        "echo tmp > /tmp/private && cat /tmp/private; echo ok > inside.txt"
    )
    assert result.stdout == "tmp\n", result
    assert not await anyio.Path("/etc/planted").exists()
    assert await sandbox.read_file("inside.txt") == b"ok\n"


@needs_bwrap
async def test_with_bwrap_there_is_no_network(tmp_path: Path) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        sandbox = await LocalBackend(tmp_path, use_bwrap=True).open("ws")
        code = "\n".join(
            [
                "import socket",
                "try:",
                f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)",
                "    print('connected')",
                "except OSError as e:",
                "    print('refused', e.errno)",
            ]
        )
        result = await sandbox.run_code(code)
        assert result.stdout.startswith("refused"), result
        plain = await LocalBackend(tmp_path / "plain", use_bwrap=False).open("ws")
        assert (await plain.run_code(code)).stdout == "connected\n"  # the same probe does reach it unisolated
    finally:
        listener.close()


async def test_a_workspace_replaced_by_a_symlink_is_not_opened(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "workspaces", use_bwrap=False)
    (tmp_path / "workspaces").mkdir()
    os.symlink("/", tmp_path / "workspaces" / "hijacked")
    with pytest.raises(PathEscapeError, match="symlink"):
        await backend.open("hijacked")


async def test_an_entry_removed_while_listing_is_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = await LocalBackend(tmp_path / "workspaces", use_bwrap=False).open("ws")
    await sandbox.write_file("kept.txt", "x")
    listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda fd: [*listdir(fd), "gone.txt"])  # as if deleted right after
    assert [e.name for e in await sandbox.list_dir(".")] == ["kept.txt"]
