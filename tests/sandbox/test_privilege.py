"""Escapes an attacker would try from inside a bubblewrap sandbox, run by a root server (as CI is).

Each probe runs in the sandbox and prints a word only if the escape worked; the host side is then
checked too (files untouched, nothing planted). Under CI these tests must run as root, so the
case that matters most (a root server) is the one exercised.
"""

from __future__ import annotations

import errno
import hashlib
import os
import platform
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from runtime.runtime import Runtime
from runtime.sandbox import local
from runtime.sandbox.base import IsolationUnavailableError, SandboxError
from runtime.sandbox.confine import HOST_TOOL_UID, SANDBOX_UID
from runtime.sandbox.local import LocalBackend, LocalSandbox
from runtime.sandbox.policy import SandboxPolicy
from tests.needs import require_root, unavailable
from tests.sandbox.conftest import require_bwrap

pytestmark = pytest.mark.anyio


@pytest.fixture
async def boxed(tmp_path: Path) -> AsyncIterator[LocalSandbox]:
    require_bwrap()
    sandbox = await LocalBackend(tmp_path / "workspaces", use_bwrap=True).open("ws")
    yield sandbox
    await sandbox.close()


def _status(text: str) -> dict[str, str]:
    return {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines() if ":" in line)}


def test_ci_runs_the_escape_tests_as_root() -> None:
    """The escape tests matter most for a root server; CI runs as root, so they exercise that case."""
    require_root("the escape tests matter most for a root server")


async def test_a_command_holds_no_capability_and_no_root_uid(boxed: LocalSandbox) -> None:
    for runner in ("run_command", "run_code"):
        if runner == "run_command":
            result = await boxed.run_command("cat /proc/self/status; id -u; id -g")
        else:
            result = await boxed.run_code("print(open('/proc/self/status').read())\nimport os\nprint(os.getuid())")
        assert result.ok, result
        status = _status(result.stdout)
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert status[cap] == "0000000000000000", (runner, cap, status[cap])
        assert status["NoNewPrivs"] == "1"
        # A root server's commands run as its dedicated tool uid on the host too (no user namespace
        # mapping them onto host root); anyone else's, as 65534 in a user namespace.
        expected = str(HOST_TOOL_UID if os.geteuid() == 0 else SANDBOX_UID)
        assert status["Uid"].split() == [expected] * 4 and status["Gid"].split() == [expected] * 4
        assert status["Groups"] in ("", expected), status["Groups"]
    session = await boxed.run_code("import os\nprint(os.getsid(0) == os.getpid() or os.getsid(0) != os.getppid())")
    assert session.stdout == "True\n"


async def test_remount_and_mount_are_refused_and_host_usr_is_untouched(boxed: LocalSandbox) -> None:
    planted = Path("/usr/rath-planted-by-sandbox")
    result = await boxed.run_command(
        "mount -o remount,rw /usr 2>/dev/null && echo remounted; "
        "mount -o remount,rw,bind /usr /usr 2>/dev/null && echo rebound; "
        "mount -t tmpfs none /tmp 2>/dev/null && echo mounted; "
        "mount --bind /usr /tmp 2>/dev/null && echo bound; "
        f"touch {planted} 2>/dev/null && echo planted; "
        "unshare -r true 2>/dev/null && echo new-userns; "
        "unshare -m true 2>/dev/null && echo new-mountns; "
        "echo done"
    )
    assert result.stdout == "done\n", result
    assert not await anyio.Path(planted).exists()


async def test_host_etc_passwd_is_not_writable(boxed: LocalSandbox) -> None:
    before = hashlib.sha256(await anyio.Path("/etc/passwd").read_bytes()).hexdigest()
    result = await boxed.run_code(
        "import os\n"
        "for how in ('a', 'r+'):\n"
        "    try:\n"
        "        open('/etc/passwd', how).write('evil::0:0::/:/bin/sh\\n')\n"
        "        print('written', how)\n"
        "    except OSError as e:\n"
        "        print('refused', e.errno)\n"
        "for call in (lambda: os.chmod('/etc/passwd', 0o666), lambda: os.rename('/etc/passwd', '/etc/p2')):\n"
        "    try:\n"
        "        call(); print('changed')\n"
        "    except OSError as e:\n"
        "        print('refused', e.errno)\n"
    )
    refusals = {f"refused {code}" for code in (errno.EROFS, errno.EACCES, errno.EPERM)}
    assert set(result.stdout.split("\n")[:4]) <= refusals, result
    assert hashlib.sha256(await anyio.Path("/etc/passwd").read_bytes()).hexdigest() == before


async def test_proc_1_root_and_host_processes_are_out_of_reach(boxed: LocalSandbox, tmp_path: Path) -> None:
    canary = tmp_path / "host-canary.txt"
    canary.write_text("host only")
    result = await boxed.run_command(
        f"cat /proc/1/root{canary} 2>/dev/null && echo via-proc1; "
        f"cat {canary} 2>/dev/null && echo direct; "
        "ls -d /proc/1/root/var /proc/1/root/home /proc/1/root/etc/shadow 2>/dev/null | grep -q . && echo host-dirs; "
        "ls /proc/1/root/ >/dev/null 2>&1 || echo no-proc1-root; "
        "ls /proc | grep -E '^[0-9]+$' | wc -l"
    )
    lines = result.stdout.split()
    assert "via-proc1" not in lines and "direct" not in lines and "host-dirs" not in lines, result
    assert int(lines[-1]) < 10  # only the sandbox's own few processes, not the host's


async def test_device_nodes_are_unreachable(boxed: LocalSandbox) -> None:
    result = await boxed.run_command(
        "for d in /dev/sda /dev/vda /dev/nvme0n1 /dev/mem /dev/kmem /dev/port /dev/kmsg /dev/fuse; do "
        "[ -e $d ] && echo exists:$d; done; "
        "mknod /tmp/disk b 8 0 2>/dev/null && echo mknod-block; "
        "mknod /tmp/mem c 1 1 2>/dev/null && echo mknod-mem; "
        "echo done"
    )
    assert result.stdout == "done\n", result
    listing = await boxed.run_command("ls /dev")
    assert set(listing.stdout.split()) <= {
        "console",
        "core",
        "fd",
        "full",
        "mqueue",
        "null",
        "ptmx",
        "pts",
        "random",
        "shm",
        "stderr",
        "stdin",
        "stdout",
        "tty",
        "urandom",
        "zero",
    }


def _setid_or_root_owned(root: Path, allowed: set[str]) -> list[str]:
    """Entries under ``root`` (host view) that are setuid/setgid or belong to root, but for ``allowed``."""
    bad = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            if path.name not in allowed and (st.st_mode & (stat.S_ISUID | stat.S_ISGID) or st.st_uid == 0):
                bad.append(f"{path.relative_to(root)} {oct(st.st_mode)} uid {st.st_uid}")
    return bad


def _plant_setuid_file(path: Path) -> None:
    """A setuid file the sandbox can read and copy, as one in /usr/bin would be."""
    path.write_bytes(Path("/bin/sh").read_bytes())
    path.chmod(0o4755)


async def test_a_command_leaves_no_setuid_file_and_nothing_owned_by_root(boxed: LocalSandbox) -> None:
    """``cp /bin/sh s && chmod 4755 s`` must not leave a setuid-root shell for local users to run."""
    await anyio.to_thread.run_sync(_plant_setuid_file, boxed.root / "planted-suid")
    await boxed.write_file("sub/by-tool.txt", "written by the file tool\n")
    result = await boxed.run_command(
        "cp /bin/sh ./s && chmod 4755 s 2>/dev/null && echo chmod-u; chmod g+s s 2>/dev/null && echo chmod-g; "
        "install -m 4755 /bin/sh i 2>/dev/null && echo install; "
        "cp -p planted-suid copied 2>/dev/null; "
        "tar -cf t.tar planted-suid && mkdir x && tar -xpf t.tar -C x 2>/dev/null; "
        "mkdir -m 2755 d 2>/dev/null; "
        "echo more >> sub/by-tool.txt && echo appended; "
        'python3 -c "\nimport os, ctypes\n'
        "def tryit(name, call):\n"
        "    try:\n        call(); print(name)\n    except OSError:\n        pass\n"
        "tryit('open', lambda: os.close(os.open('o', os.O_CREAT | os.O_WRONLY, 0o4755)))\n"
        "tryit('mknod', lambda: os.mknod('m', 0o100000 | 0o6755))\n"
        "tryit('fchmod', lambda: os.chmod(os.open('s', os.O_RDONLY), 0o2755))\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "if libc.syscall(452, -100, b's', 0o4755, 0) == 0: print('fchmodat2')\n"
        '"; echo done'
    )
    assert result.stdout.splitlines() == ["appended", "done"], result
    assert _setid_or_root_owned(boxed.root, {"planted-suid"}) == []
    # the file tools hand what they make to the tool uid, so the command could append to it above
    assert (await boxed.read_file("sub/by-tool.txt")) == b"written by the file tool\nmore\n"
    chown = await boxed.run_command("chown 0:0 s 2>/dev/null && echo chowned; echo done")
    assert chown.stdout == "done\n"


async def test_the_home_the_workspaces_and_each_workspace_are_the_servers_alone(tmp_path: Path) -> None:
    require_bwrap()
    async with Runtime.open(tmp_path / "home", workers=0) as rt:
        backend = rt.sandboxes.backends["local"]
        assert isinstance(backend, LocalBackend)
        sandbox = await backend.open("ws")
        for path in (rt.home, backend.root, sandbox.root):
            assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
        # a root server's workspace belongs to the tool uid, which its commands run as; no one else's
        assert sandbox.root.stat().st_uid == (HOST_TOOL_UID if os.geteuid() == 0 else os.geteuid())
        await backend.clone("ws", "copy")
        copy = backend.path_of("copy")
        assert stat.S_IMODE(copy.stat().st_mode) == 0o700 and copy.stat().st_uid == sandbox.root.stat().st_uid


async def test_an_old_workspace_is_handed_over_without_its_setuid_files(tmp_path: Path) -> None:
    """A workspace made before commands ran as the tool uid may hold a setuid-root file: opening it fixes that."""
    require_bwrap()
    require_root("only a root server hands workspaces over to a tool uid")
    old = tmp_path / "workspaces" / "old"
    (old / "nested").mkdir(parents=True)
    (old / "nested" / "suid").write_bytes(b"#!/bin/sh\n")
    (old / "nested" / "suid").chmod(0o6755)
    (old / "link").symlink_to("/etc/passwd")
    old.chmod(0o755)
    sandbox = await LocalBackend(tmp_path / "workspaces", use_bwrap=True).open("old")
    assert _setid_or_root_owned(old, set()) == []
    assert stat.S_IMODE((await anyio.Path(old).stat()).st_mode) == 0o700
    assert (await anyio.Path("/etc/passwd").stat()).st_uid == 0  # the symlink's target was left alone
    result = await sandbox.run_command("echo changed > nested/suid && cat nested/suid")
    assert result.stdout == "changed\n", result


async def test_a_seccomp_filter_refuses_the_dangerous_calls(boxed: LocalSandbox) -> None:
    numbers = {
        "x86_64": {"keyctl": 250, "ptrace": 101, "bpf": 321, "getpid": 39, "x32-getpid": 0x40000000 | 39},
        "aarch64": {"keyctl": 219, "ptrace": 117, "bpf": 280, "getpid": 172},
    }.get(platform.machine())
    if numbers is not None:  # io_uring: the same numbers on both
        numbers |= {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
    if numbers is None:
        # the sandbox runs without a filter there: a gap CI must not pass over (tests/needs.py)
        unavailable(f"a seccomp table for {platform.machine()}", "the sandbox has tables for x86_64 and aarch64")
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"for name, nr in {sorted(numbers.items())!r}:\n"
        "    r = libc.syscall(nr, 0, 0, 0, 0)\n"
        "    print(name, 'ok' if r >= 0 else os.strerror(ctypes.get_errno()))\n"
        "print(*[l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp:')])\n"
    )
    result = await boxed.run_code(code)
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines()[:-1])
    assert lines.pop("getpid") == "ok", result
    assert set(lines.values()) == {"Operation not permitted"}, result
    assert result.stdout.splitlines()[-1] == "2"  # filter mode


async def test_a_root_server_refuses_commands_where_bwrap_needs_a_user_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without CAP_SYS_ADMIN (some containers' root), bubblewrap could only map the sandbox onto host root."""
    require_bwrap()
    require_root("only a root server makes its sandboxes without a user namespace")
    assert local.root_bwrap_problem() is None  # here, as under CI, root's bubblewrap works
    monkeypatch.setattr(local, "root_bwrap_problem", lambda: "bwrap: Creating new namespace failed: EPERM")
    sandbox = await LocalBackend(tmp_path / "ws", policy=SandboxPolicy()).open("w")
    assert sandbox.capabilities.isolation == "unavailable"
    with pytest.raises(IsolationUnavailableError, match=r"runs as root.*Creating new namespace failed.*CAP_SYS_ADMIN"):
        await sandbox.run_command("true")
    with pytest.raises(SandboxError, match="--isolation bwrap cannot be honoured"):
        LocalBackend(tmp_path / "ws", use_bwrap=True)
    assert LocalBackend(tmp_path / "ws", use_bwrap=False).mode == "none"


async def test_isolation_none_under_a_root_server_runs_commands_as_the_tool_uid(tmp_path: Path) -> None:
    """``--isolation none`` gives up the namespaces, never the privilege drop: a root server's unisolated
    commands run as the dedicated tool uid too, hold no capability, and leave nothing with root's powers."""
    require_root("only a root server has privileges for its commands to give up")
    backend = LocalBackend(tmp_path / "workspaces", use_bwrap=False)
    sandbox = await backend.open("ws")
    assert sandbox.capabilities.isolation == "none"
    ids = f"{HOST_TOOL_UID} {HOST_TOOL_UID}"
    result = await sandbox.run_command("id -u; id -g; grep -E '^(Cap(Prm|Eff|Bnd|Amb)|Seccomp):' /proc/self/status")
    assert result.ok, result
    lines = result.stdout.splitlines()
    assert " ".join(lines[:2]) == ids, result.stdout
    assert [line.split()[1] for line in lines[2:]] == ["0000000000000000"] * 4 + ["2"], result.stdout
    copied = await sandbox.run_command("cp /bin/sh ./s; chmod 4755 s; chmod 2755 s; ls -n s")
    shell = os.stat(sandbox.root / "s")
    assert (shell.st_uid, shell.st_gid) == (HOST_TOOL_UID, HOST_TOOL_UID), copied
    assert not shell.st_mode & (stat.S_ISUID | stat.S_ISGID), copied  # the launcher's seccomp filter
    home = os.stat(sandbox.root)
    assert (home.st_uid, stat.S_IMODE(home.st_mode)) == (HOST_TOOL_UID, 0o700)
    code = await sandbox.run_code("import os\nprint(os.getuid(), os.getgid(), os.getcwd())")
    assert code.stdout == f"{ids} {sandbox.root}\n", code
    await sandbox.write_file("made-by-the-server.txt", "x")
    assert os.stat(sandbox.root / "made-by-the-server.txt").st_uid == HOST_TOOL_UID
