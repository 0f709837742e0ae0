"""Default limits on tool commands: each one holds, and a command that hits one is told which.

Every test runs with bubblewrap and with ``--isolation none`` (plain subprocesses); each is bounded
(small limits, a timeout as a safety net) and checks that nothing it started is left running.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from rath_mcp.cli import _sandbox_policy, build_parser
from runtime.sandbox import SandboxError
from runtime.sandbox.base import WorkspaceFullError
from runtime.sandbox.local import LocalBackend, LocalSandbox
from runtime.sandbox.policy import SandboxPolicy, ToolLimits, load_policy
from tests.needs import require_root, unavailable
from tests.sandbox.conftest import require_bwrap

pytestmark = pytest.mark.anyio

LIMITS = ToolLimits(memory_bytes=256 * 1024**2, procs=24, file_size_bytes=1024**2, cpu_s=1, workspace_bytes=4 * 1024**2)


@pytest.fixture(params=["bwrap", "bwrap-no-cgroup", "plain", "plain-no-cgroup"])
async def limited(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LocalSandbox]:
    bwrap = request.param.startswith("bwrap")
    if bwrap:
        require_bwrap()
    backend = LocalBackend(tmp_path / "ws", use_bwrap=bwrap, policy=SandboxPolicy(limits=LIMITS))
    if request.param.endswith("no-cgroup"):
        backend.cgroups = None  # as for a non-root server: rlimits and the launcher's reaper only
    sandbox = await backend.open("w")
    yield sandbox
    await sandbox.close()


def _processes_with(marker: str) -> list[int]:
    """Host pids whose command line carries ``marker`` (a sandbox's processes are visible from here)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                continue
    return found


async def _none_left(marker: str) -> None:
    with anyio.fail_after(10):  # the processes are killed already; the kernel may still be reaping them
        while _processes_with(marker):  # noqa: ASYNC110 - waiting on other processes' exit; no event exists
            await anyio.sleep(0.02)


async def test_memory_limit(limited: LocalSandbox) -> None:
    result = await limited.run_code("x = bytearray(512 * 1024 * 1024)\nprint('allocated')", timeout_s=60)
    assert result.limit == "memory" and "allocated" not in result.stdout, result
    assert "hit the memory limit (268435456 bytes" in result.stderr and "--tool-memory" in result.stderr
    small = await limited.run_code("x = bytearray(16 * 1024 * 1024)\nprint('fine')")
    assert small.ok and small.limit is None and small.stdout == "fine\n"


# Four processes that each hold 48 MiB, each well under the limit alone (RLIMIT_AS too). Once all
# four have allocated, the parent asks each whether it is still there: four answers mean 192 MiB
# were held at once (a child killed after its allocation answers nothing).
_SPREAD = """
import os, sys
hold_r, hold_w = os.pipe()
kept = []
for _ in range(4):
    up_r, up_w = os.pipe()
    down_r, down_w = os.pipe()
    if os.fork() == 0:
        for fd in [fd for pair in kept for fd in pair] + [up_r, down_w, hold_w]:
            os.close(fd)
        block = bytes([1]) * (48 << 20)  # written, so resident
        os.write(up_w, b".")
        os.read(down_r, 1)
        os.write(up_w, b"!")
        os.read(hold_r, 1)  # until the parent exits
        os._exit(0)
    os.close(up_w)
    os.close(down_r)
    kept.append((up_r, down_w))
ready = [os.read(up, 1) == b"." for up, _ in kept]  # b"" from a child killed before
alive = 0
for up, down in kept:
    try:
        os.write(down, b"?")
        alive += os.read(up, 1) == b"!"
    except BrokenPipeError:
        pass
print(sum(ready), "ready", alive, "alive")
sys.exit(0 if alive == 4 else 1)
"""


async def test_the_memory_limit_holds_for_the_whole_command(limited: LocalSandbox) -> None:
    if "memory" in limited.capabilities.unenforced:
        # Without a memory cgroup each process is held to the limit alone (RLIMIT_AS); the sandbox says so.
        assert limited.capabilities.unenforced in (("memory",), ("procs", "memory"))
        return
    small = limited.with_policy(SandboxPolicy(limits=replace(LIMITS, memory_bytes=160 * 1024**2)))
    result = await small.run_code(_SPREAD, timeout_s=60)
    assert result.limit == "memory" and "4 alive" not in result.stdout, result
    assert "hit the memory limit (167772160 bytes" in result.stderr
    assert (await small.run_command("echo after")).stdout == "after\n"


def test_a_memory_cgroup_is_there_to_be_had() -> None:
    """The whole-command memory limit needs a writable memory cgroup: CI (root) must have one."""
    require_root("a non-root server usually has no writable cgroup; its commands are held per process")
    backend = LocalBackend(Path("/nonexistent-rath-workspaces"), use_bwrap=False)
    if backend.cgroups is None or backend.cgroups.memory is None:
        unavailable("a writable memory cgroup (v1 memory hierarchy, or v2 with memory delegated)", "run as root")


async def test_a_bounded_fork_bomb_hits_the_process_limit_and_is_cleaned_up(limited: LocalSandbox) -> None:
    marker = f"61.{os.getpid()}{id(limited) % 1000}"
    # Held everywhere: a root server's commands, isolated or not, run as the tool uid, which
    # RLIMIT_NPROC counts (it exempts only uid 0) where no pids cgroup can be had.
    assert "procs" not in limited.capabilities.unenforced
    result = await limited.run_command(f"for i in $(seq 200); do sleep {marker} & done; wait", timeout_s=60)
    assert result.limit == "procs" and not result.timed_out, result
    assert "hit the procs limit (24 processes" in result.stderr and "--tool-procs" in result.stderr
    await _none_left(marker)
    assert (await limited.run_command("echo after")).stdout == "after\n"


async def test_file_size_limit(limited: LocalSandbox) -> None:
    result = await limited.run_command("head -c 3000000 /dev/zero > big.bin", timeout_s=60)
    assert result.limit == "file_size" and result.exit_code != 0, result
    assert "hit the file_size limit (1048576 bytes" in result.stderr and "--tool-file-size" in result.stderr
    assert (limited.root / "big.bin").stat().st_size <= LIMITS.file_size_bytes


async def test_cpu_limit(limited: LocalSandbox) -> None:
    result = await limited.run_code("while True:\n    pass", timeout_s=120)
    assert result.limit == "cpu" and not result.timed_out, result
    assert "hit the cpu limit (1 CPU seconds" in result.stderr and "--tool-cpu-s" in result.stderr


async def test_workspace_cap_on_write_file_and_after_a_command(limited: LocalSandbox) -> None:
    await limited.write_file("a.bin", b"x" * (3 * 1024**2))
    with pytest.raises(WorkspaceFullError, match="over its 4194304-byte cap"):
        await limited.write_file("b.bin", b"y" * (2 * 1024**2))
    assert not (limited.root / "b.bin").exists()
    await limited.write_file("a.bin", b"z" * (3 * 1024**2))  # replacing a file frees its old size first
    result = await limited.run_command("head -c 900000 /dev/zero > c1; head -c 900000 /dev/zero > c2", timeout_s=60)
    assert result.limit == "workspace" and result.exit_code == 0, result
    assert "hit the workspace limit" in result.stderr and "workspace_size" in result.stderr


async def test_a_detached_child_does_not_outlive_its_command(limited: LocalSandbox) -> None:
    marker = f"62.{os.getpid()}{id(limited) % 1000}"
    finished = await limited.run_command(f"setsid sleep {marker} > /dev/null 2>&1 & echo started", timeout_s=60)
    assert finished.stdout == "started\n"
    await _none_left(marker)
    timed = await limited.run_command(f"setsid sleep {marker} > /dev/null 2>&1 & sleep {marker}", timeout_s=0.5)
    assert timed.timed_out
    await _none_left(marker)


def test_limits_come_from_defaults_config_json_and_flags(tmp_path: Path) -> None:
    assert load_policy(tmp_path) == SandboxPolicy()
    (tmp_path / "config.json").write_text("{not json")  # the server reports the file; tools get the defaults
    assert load_policy(tmp_path) == SandboxPolicy()
    assert SandboxPolicy().limits.describe() == {
        "memory_bytes": 2 * 1024**3,
        "procs": 256,
        "file_size_bytes": 256 * 1024**2,
        "cpu_s": 300,
        "workspace_bytes": 2 * 1024**3,
    }
    config = {"sandbox": {"memory": "1G", "procs": 64, "workspace_size": "100M", "workflows": {"agent": {"cpu_s": 9}}}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    policy = load_policy(tmp_path)
    assert (policy.limits.memory_bytes, policy.limits.procs, policy.limits.workspace_bytes) == (1024**3, 64, 100 << 20)
    assert policy.for_workflow("agent").limits.cpu_s == 9 and policy.for_workflow("other") is policy
    args = build_parser().parse_args(
        ["serve", "--tool-memory", "512M", "--tool-procs", "32", "--tool-file-size", "10M", "--tool-cpu-s", "5"]
    )
    flagged = _sandbox_policy(args, tmp_path)
    assert flagged.limits == ToolLimits(512 << 20, 32, 10 << 20, 5, 100 << 20)  # flags win, config.json fills in


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"memory": "lots"}, "not a size"),
        ({"procs": 0}, "positive"),
        ({"cpu_s": "1.5"}, "whole number"),
        ({"isolation": "docker"}, "choose one of auto, bwrap, none"),
        ({"allow_net": "bad host!"}, "not a host name"),
        ({"allow_net": "example.com:99999"}, "bad port"),
        ({"speed": 3}, "unknown sandbox setting"),
    ],
)
def test_bad_settings_are_clear_errors(settings: dict[str, object], message: str) -> None:
    with pytest.raises(SandboxError, match=message):
        SandboxPolicy().updated(settings, where="test")


def test_the_docs_sandbox_config_is_what_load_policy_reads(tmp_path: Path) -> None:
    from tests.doc_text import DOCS, blocks

    [snippet] = blocks(DOCS / "sandbox.md", "jsonc")
    (tmp_path / "config.json").write_text(snippet)
    policy = load_policy(tmp_path)
    assert policy.limits == ToolLimits(4 * 1024**3, 512, 1024**3, 600, 10 * 1024**3)
    assert policy.allows("pypi.org", 443) and not policy.allows("api.github.com", 443)
    assert policy.for_workflow("agent").allows("api.github.com", 443)
