"""Who holds a lease, and whether that process still lives: the ground of prompt takeover.

A lease alone cannot tell a dead worker from a slow one until it runs out (30 s by default). But a
process can tell for certain whether another process *it can see* is gone: so every claim records
its holder (``Holder``), and a worker that sees a holder of its own host disappear takes its runs
over at once (``RunStore.take_over``) instead of waiting for the lease.

"Its own host" must mean "processes whose ``/proc`` entries I see", or a live process would be
mistaken for a dead one. So the host is not the hostname or ``/etc/machine-id`` (containers copy
both; a container sees only its own pid namespace) but the running kernel (``boot_id``), the pid
namespace and the user (``/proc`` may hide other users' processes, ``hidepid``). A pid reused by
a later process is not mistaken for the holder: a process is the pair (pid, start time in clock
ticks since boot, ``/proc/PID/stat`` field 22), which no two processes of one boot share. A zombie
(killed, not yet reaped by its parent) runs no code and counts as gone. Where ``/proc`` is missing
(macOS) a claim has no holder, and only the lease recovers its runs. After a reboot the ``boot_id``
changes, so the runs of a machine that rebooted are recovered by their leases too.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from runtime.durable.store import Holder

PROC = Path("/proc")
GONE_STATES = frozenset("ZX")  # zombie, dead: the process runs no more code


def _stat(pid: int | str, proc: Path) -> tuple[str, int] | None:
    """(state, start time) of a process from ``/proc/PID/stat``; None when there is no such process."""
    try:
        text = (proc / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])  # field 3 (state) and field 22 (starttime) of proc(5)


def host_identity(proc: Path = PROC) -> str | None:
    """This process's host in the sense of ``Holder.host``; None when ``/proc`` cannot tell."""
    try:
        boot = (proc / "sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        pid_ns = os.readlink(proc / "self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return None
    return f"{boot}/{pid_ns}/uid{os.getuid()}@{socket.gethostname()}"


def this_process(proc: Path = PROC) -> Holder | None:
    """The ``Holder`` of claims this process makes (None where ``/proc`` cannot identify it)."""
    host = host_identity(proc)
    if host is None:
        return None
    try:
        found = _stat(os.getpid(), proc)
    except (OSError, ValueError, IndexError):
        return None
    return None if found is None else Holder(host, os.getpid(), found[1])


def is_gone(pid: int, started: int, proc: Path = PROC) -> bool:
    """True when the process (``pid``, ``started``) of this host has certainly ended.

    Anything uncertain (a ``/proc`` entry we may not read, a malformed one) counts as alive: the
    lease then decides, as it would without prompt takeover."""
    try:
        found = _stat(pid, proc)
    except (OSError, ValueError, IndexError):
        return False
    if found is None:
        return True
    state, start = found
    return start != started or state in GONE_STATES


__all__ = ["Holder", "host_identity", "is_gone", "this_process"]
