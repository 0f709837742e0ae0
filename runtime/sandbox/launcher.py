"""The launcher: the first program of every local command, run as ``python -I -S -c <this file>``.

It stands between the sandbox and the command, inside bubblewrap when there is one, and does what
only a process on that side can do:

- for a root server, first gives up root for good: empties the capability bounding set, drops the
  supplementary groups, switches uid and gid to the dedicated unprivileged one it is given, and
  clears the inheritable and ambient sets (bubblewrap left it CAP_SETUID/CAP_SETGID/CAP_SETPCAP for
  exactly this; the uid switch clears the rest), refusing to run the command if any step fails;
- sets the resource limits (RLIMIT_AS, RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_CPU, no core dumps) *inside*
  the sandbox's user namespace, where RLIMIT_NPROC counts only this command's processes (without
  one, it counts all of the user's, so the limit is then set that many above what already runs);
- without bubblewrap (``--isolation none``), loads the seccomp filter itself (``seccomp.py``);
- sets ``no_new_privs`` and makes itself a child subreaper, so that a child that detaches
  (``setsid cmd &``) is still its descendant, and kills every descendant when the command ends or
  when it gets SIGTERM (the host's timeout in ``--isolation none``);
- with a network allow-list, serves a TCP port on the sandbox's loopback that forwards each
  connection to the host's filtering proxy over the UNIX socket bound into the sandbox (the sandbox
  has no other network: ``HTTP(S)_PROXY`` point at this port);
- reports how the command ended (exit code or signal, CPU seconds) as one JSON line on a status fd,
  so the host can say which limit was hit.

Standard library only, no imports from ``runtime``: it runs under the system interpreter with ``-I -S``.
Usage: ``python -I -S -c SOURCE CONFIG_JSON ARGV...``.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def drop_root(uid: int) -> None:
    """Become ``uid``/``uid`` with no groups and no capability in any set, or exit 126 trying."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        for cap in range(64):  # EINVAL past the kernel's last capability: nothing to drop there
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from uid 0 to another: the permitted and effective sets empty
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
        data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable, twice: all empty
        if libc.capset(header, data) != 0:
            raise OSError(ctypes.get_errno(), "capset")
        if os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid) or os.getgroups():
            raise OSError(0, "the uid switch did not hold")
    except OSError as exc:
        sys.stderr.write(f"rath sandbox: cannot give up root ({exc}); the command was not run\n")
        sys.stdout.flush()
        os._exit(126)


def set_limits(limits: dict[str, int]) -> None:
    pairs: list[tuple[int, int | None, int]] = [
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_AS, limits.get("as"), 0),
        (resource.RLIMIT_NPROC, limits.get("nproc"), 0),
        (resource.RLIMIT_FSIZE, limits.get("fsize"), 0),
        # A hard limit above the soft one: SIGXCPU first (reported), SIGKILL if it is ignored.
        (resource.RLIMIT_CPU, limits.get("cpu"), 2),
    ]
    for which, value, slack in pairs:
        if value is None:
            continue
        _soft, hard = resource.getrlimit(which)
        cap = value + slack
        new_hard = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
        resource.setrlimit(which, (min(value, new_hard), new_hard))


def tasks_of_user() -> int:
    """Tasks (threads) the real uid already runs: outside a user namespace RLIMIT_NPROC counts them all."""
    uid, total = os.getuid(), 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as handle:
                fields = dict(line.split(":", 1) for line in handle if ":" in line)
        except OSError:
            continue
        if int(fields.get("Uid", "-1 ").split()[0]) == uid:
            total += int(fields.get("Threads", "1").strip())
    return total


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load_filter(fd: int) -> None:
    """Install the seccomp program read from ``fd`` (``--isolation none``: no bubblewrap to load it),
    or exit 126 without running the command."""
    code = b""
    while chunk := os.read(fd, 65536):
        code += chunk
    os.close(fd)
    program = ctypes.create_string_buffer(code, len(code))
    fprog = SockFprog(len(code) // 8, ctypes.cast(program, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        sys.stderr.write(f"rath sandbox: cannot load the seccomp filter ({os.strerror(ctypes.get_errno())})\n")
        os._exit(126)


def prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(option, value, 0, 0, 0)


def children_of(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants() -> None:
    """Stop then kill every descendant (orphans come back to us: we are their subreaper)."""
    me = os.getpid()
    for _ in range(1000):
        found = children_of(me)
        if not found:
            return
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in found:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break


def pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def bridge(listener: socket.socket, unix_path: str) -> None:
    """Accept on the loopback port; splice each connection onto the host proxy's UNIX socket."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(unix_path)
        except OSError:
            client.close()
            upstream.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


def main() -> None:
    config = json.loads(sys.argv[1])
    argv = sys.argv[2:]
    if config.get("drop_to") is not None:
        drop_root(int(config["drop_to"]))
    if config.get("cwd"):
        os.chdir(config["cwd"])
    status_fd = config.get("status_fd")
    listener = None
    net = config.get("bridge")
    if net:
        listener = socket.create_server(("127.0.0.1", int(net["port"])))
    limits = config.get("limits", {})
    if config.get("nproc_on_top") and limits.get("nproc"):
        limits["nproc"] += tasks_of_user()  # "procs more than the user runs already"
    set_limits(limits)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    if config.get("seccomp_fd") is not None:
        load_filter(int(config["seccomp_fd"]))
    signal.signal(signal.SIGTERM, lambda *_: kill_descendants())
    if listener is not None:
        threading.Thread(target=bridge, args=(listener, net["socket"]), daemon=True).start()
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        sys.stderr.write(f"cannot run {argv[0]!r}: {exc.strerror}\n")
        sys.exit(127)
    _, status, usage = os.wait4(child.pid, 0)
    kill_descendants()
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    code = 128 + sig if sig else os.WEXITSTATUS(status)
    if status_fd is not None:
        report = {"exit": code, "signal": sig, "cpu_s": usage.ru_utime + usage.ru_stime}
        try:
            os.write(status_fd, (json.dumps(report) + "\n").encode())
        except OSError:
            pass
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
