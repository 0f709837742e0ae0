"""How a local command is confined: the bubblewrap arguments, the launcher, and naming the limit hit.

The command line of a local command is, from the outside in::

    [sh -c 'echo $$ > cgroup.procs; exec "$@"']    pids and memory cgroups, where writable (cgroup.py)
    [bwrap --unshare-all --unshare-user --uid 65534 --gid 65534 --cap-drop ALL --disable-userns ...]
    python -I -S -c <launcher.py> CONFIG            limits, subreaper, network bridge, status report
    the command itself

Which uid a command has on the host depends on who runs the server:

- a non-root server: bubblewrap maps the sandbox's uid 65534 onto the server's own uid (a user
  namespace is all an unprivileged user can have); files a command makes belong to the server's user;
- a root server: a user namespace made by root maps 65534 onto host uid 0, so a command's files
  would belong to root on the host, and ``chmod 4755`` on a copy of ``/bin/sh`` would leave a
  setuid-root shell in the workspace. So a root server does not ask bubblewrap for a user
  namespace: bubblewrap makes the other namespaces with root's own capabilities, keeps only
  CAP_SETUID, CAP_SETGID and CAP_SETPCAP for the launcher, and the launcher, before anything else,
  empties the bounding set, drops every supplementary group and switches to ``HOST_TOOL_UID``
  (uid and gid), a dedicated unprivileged uid, which clears the remaining capabilities. The
  workspace belongs to that uid (mode 0700, under the root-owned 0700 home: only bubblewrap,
  started by root, can reach it to bind it), and the server's file tools hand what they create to
  it. A user namespace would not do: bubblewrap resolves its bind sources as the sandbox's host
  uid, which cannot pass through the 0700 home.

Either way the seccomp filter refuses any mode with S_ISUID or S_ISGID (``seccomp.py``), so no file
a command leaves behind is setuid or setgid, whoever owns it.

Inside bubblewrap a command has no capabilities (effective, permitted, inheritable, bounding and
ambient sets empty), uid/gid 65534 (``HOST_TOOL_UID`` for a root server), ``no_new_privs``, no
way to make a user namespace, its own session, and dies with its parent; the host is
seen read-only and only in part (system directories and a few ``/etc`` files), the workspace is the
only writable host directory, ``/tmp`` is a private tmpfs capped at the file-size limit, ``/dev``
holds only the harmless nodes (null, zero, random, tty ...), ``/proc`` shows only the sandbox's own
processes, there is no network but the allow-list proxy, and a seccomp filter makes the dangerous
system calls fail (``seccomp.py``).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from runtime.sandbox import seccomp
from runtime.sandbox.policy import ToolLimits

SANDBOX_UID = 65534  # "nobody": the uid and gid commands see inside the user namespace
# The host uid and gid of a root server's commands: dedicated to them (not "nobody", which other
# daemons share: a process of the same uid could signal or trace the sandbox's), below 65536 so that
# it exists in containers that map only that many ids, and outside systemd's dynamic range
# (61184-65519) and the usual system and user ranges.
HOST_TOOL_UID = 65530
PROXY_PORT = 3128  # the launcher's loopback port inside the sandbox, forwarded to the host proxy
PROXY_SOCKET = "/run/rath/net.sock"  # where the host proxy's UNIX socket appears inside

# Read-only system directories a sandboxed command may see (when they exist).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Only the parts of /etc that programs need to run: the rest (pip.conf, npmrc, database configs,
# gitconfig, ...) can hold credentials and stays hidden.
ETC_ENTRIES = (
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

# What tells us a limit was hit when no signal says so: the messages programs print when a
# fork or an allocation fails (checked only in stderr, and only for a failed command).
_PROCS_HINTS = ("Cannot fork", "fork: retry", "Resource temporarily unavailable", "BlockingIOError", "can't fork")
_MEMORY_HINTS = ("MemoryError", "Cannot allocate memory", "out of memory", "bad_alloc", "memory exhausted")

LIMIT_FLAGS = {
    "memory": ("--tool-memory", "memory", "bytes of memory"),
    "procs": ("--tool-procs", "procs", "processes and threads"),
    "file_size": ("--tool-file-size", "file_size", "bytes per file written"),
    "cpu": ("--tool-cpu-s", "cpu_s", "CPU seconds per process"),
    "workspace": (None, "workspace_size", "bytes in the workspace"),
}


@functools.cache
def launcher_source() -> str:
    return Path(__file__).with_name("launcher.py").read_text("utf-8")


def launcher_argv(
    python: str,
    limits: ToolLimits,
    status_fd: int,
    *,
    bridge: bool,
    own_userns: bool,
    pids_cgroup: bool,
    drop_to: int | None = None,
    cwd: Path | None = None,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The launcher's own command line (the command's argv follows it).

    RLIMIT_NPROC is left unset under a pids cgroup (the cgroup counts), and is set on top of the
    user's running tasks without a user namespace of its own (see launcher.py), except for a
    dedicated ``drop_to`` uid, whose tasks elsewhere (other commands) it cannot see to count.
    ``drop_to``: the uid and gid the launcher switches to first (a root server's commands), then
    going to ``cwd`` (root without capabilities cannot enter the tool uid's 0700 workspace).
    ``seccomp_fd``: the filter for the launcher to load (no bubblewrap to load it)."""
    config = {
        "status_fd": status_fd,
        "drop_to": drop_to,
        "cwd": None if cwd is None else str(cwd),
        "seccomp_fd": seccomp_fd,
        "nproc_on_top": not own_userns and drop_to is None,
        "limits": {
            "as": limits.memory_bytes,
            "nproc": None if pids_cgroup else limits.procs,
            "fsize": limits.file_size_bytes,
            "cpu": limits.cpu_s,
        },
        "bridge": {"port": PROXY_PORT, "socket": PROXY_SOCKET} if bridge else None,
    }
    return [python, "-I", "-S", "-c", launcher_source(), json.dumps(config)]


def bwrap_argv(
    root: Path,
    workdir: Path,
    limits: ToolLimits,
    *,
    proxy_socket: str | None,
    seccomp_fd: int | None,
    as_root: bool = False,
) -> list[str]:
    """The bubblewrap prefix for a command working in ``root`` (see the module docstring).

    ``as_root``: bubblewrap runs as host root and the launcher drops to ``HOST_TOOL_UID``."""
    if as_root:
        args = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
        args += ["--cap-drop", "ALL"]
        args += [arg for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP") for arg in ("--cap-add", cap)]
    else:
        ids = str(SANDBOX_UID)
        args = ["bwrap", "--unshare-all", "--unshare-user", "--uid", ids, "--gid", ids, "--disable-userns"]
        args += ["--cap-drop", "ALL"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
    for directory in SYSTEM_DIRS:
        if os.path.isdir(directory):
            args += ["--ro-bind", directory, directory]
    for entry in ETC_ENTRIES:
        path = f"/etc/{entry}"
        if os.path.lexists(path):
            args += ["--ro-bind", path, path]
    prefix = sys.base_prefix
    if not any(prefix == d or prefix.startswith(d + "/") for d in SYSTEM_DIRS):
        args += [*_passable_parents(Path(prefix)), "--ro-bind", prefix, prefix]
    args += ["--dev", "/dev", "--proc", "/proc"]
    args += ["--perms", "1777", "--size", str(limits.file_size_bytes), "--tmpfs", "/tmp"]
    args += [*_passable_parents(root), "--bind", str(root), str(root)]
    if proxy_socket is not None:
        args += [*_passable_parents(Path(PROXY_SOCKET)), "--bind", proxy_socket, PROXY_SOCKET]
    # bwrap's own root is a tmpfs; make it read-only too, so /tmp and the workspace are the only writable places.
    # As root, the launcher goes to ``workdir`` once it is the tool uid (see launcher_argv).
    args += ["--remount-ro", "/", "--chdir", "/" if as_root else str(workdir)]
    return [*args, "--"]


@functools.cache
def root_bwrap_problem() -> str | None:
    """None if bubblewrap, run by root, makes a sandbox's namespaces without a user namespace; else why not.

    It needs CAP_SYS_ADMIN for that (a container's root often lacks it). Asked once per process."""
    caps = [arg for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP") for arg in ("--cap-add", cap)]
    argv = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--cap-drop", "ALL"]
    argv += [*caps, "--ro-bind", "/", "/", "--", "true"]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed: {exc}"
    if proc.returncode == 0:
        return None
    lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"bwrap exited with {proc.returncode}"


def _passable_parents(path: Path) -> list[str]:
    """Arguments making the directories above a bind first, 0755.

    bwrap gives the directories it makes above a bind the modes of the source's parents: a 0700
    ``/root`` or home would stop a root server's tool uid on its way to the interpreter or the
    workspace. (Where one of them is bound already, such as ``/tmp``, it is left as it is.)"""
    args: list[str] = []
    for parent in reversed(path.parents[:-1]):
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def seccomp_pipe() -> int | None:
    """A readable fd holding the seccomp program (bwrap reads it to EOF), or None without a filter."""
    code = seccomp.program()
    if code is None:
        return None
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, code)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(write_end)
    return read_end


def proxy_env() -> dict[str, str]:
    url = f"http://127.0.0.1:{PROXY_PORT}"
    env = {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY")}
    return {**env, "NO_PROXY": "", "no_proxy": ""}


def read_status(fd: int) -> dict[str, float]:
    """The launcher's report (empty when it wrote none: killed on timeout, or failed to start)."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while chunk := os.read(fd, 4096):
            data += chunk
    except BlockingIOError:
        pass
    try:
        report = json.loads(data.decode() or "{}")
    except ValueError:
        return {}
    return report if isinstance(report, dict) else {}


def detect_limit(status: dict[str, float], exit_code: int, stderr: str, limits: ToolLimits) -> str | None:
    """Which limit a finished command ran into, if any (from its status, exit code and messages)."""
    sig = int(status.get("signal", 0))
    shell_sig = exit_code - 128 if exit_code > 128 else 0  # a shell reports a killed child as 128 + signal
    if signal.SIGXCPU in (sig, shell_sig) or (sig == signal.SIGKILL and status.get("cpu_s", 0) >= limits.cpu_s):
        return "cpu"
    if signal.SIGXFSZ in (sig, shell_sig) or "File size limit exceeded" in stderr:
        return "file_size"
    if exit_code != 0 and any(h in stderr for h in _PROCS_HINTS):
        return "procs"
    if exit_code != 0 and any(h in stderr for h in _MEMORY_HINTS):
        return "memory"
    return None


def limit_message(limit: str, limits: ToolLimits) -> str:
    """The line added to stderr: which limit, its value, and how to raise it."""
    flag, key, unit = LIMIT_FLAGS[limit]
    value = {
        "memory": limits.memory_bytes,
        "procs": limits.procs,
        "file_size": limits.file_size_bytes,
        "cpu": limits.cpu_s,
        "workspace": limits.workspace_bytes,
    }[limit]
    how = f"{flag} or " if flag else ""
    return (
        f"\n[rath sandbox: the command hit the {limit} limit ({value} {unit}); "
        f"raise it with {how}sandbox.{key} in config.json]\n"
    )
