"""A cgroup per command, where the kernel lets us make one (a root server, usually): pids and memory.

Why: the kernel's per-process limits do not bound a command. RLIMIT_NPROC is not checked for host
uid 0 (``--isolation none`` as root), and RLIMIT_AS bounds each process alone: four processes of
1.5 GiB fit under a 2 GiB RLIMIT_AS. So where a cgroup can be had, each command gets its own, with

- ``pids.max`` = the procs limit (RLIMIT_NPROC is then left unset);
- a memory limit = the memory limit, for all of the command's processes together (v2
  ``memory.max`` with no swap and ``memory.oom.group``: the OOM killer ends the whole command; v1
  ``memory.limit_in_bytes``, also for swap where ``memsw`` exists: it ends the process it picks).

RLIMIT_AS stays set per process as well: it turns one oversized allocation into a clean
``MemoryError``/``ENOMEM`` instead of an OOM kill. The cgroup also lets the host kill every process
of a command, however it detached.

cgroup v1 (a ``pids`` and a ``memory`` hierarchy, each optional) and v2 (a cgroup whose
``cgroup.subtree_control`` has ``pids`` and/or ``memory``) both work; ``find_roots`` returns the
directories under which we may make child cgroups, or None when none is writable (then the
per-process rlimits are all there is, and ``capabilities.unenforced`` says so).

A command enters its cgroup(s) before it starts: it is launched as ``sh -c 'echo $$ > .../cgroup.procs
&& exec "$@"'``, so no child can be forked outside them.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX = "rath-"
CONTROLLERS = ("pids", "memory")


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fs type, super options) of every cgroup mount."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) > 4 and len(tail) > 2 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[4], tail[0], tail[2]))
    return found


def _own_paths() -> dict[str, str]:
    """Our cgroup path per controller list ('' is the v2 hierarchy), from /proc/self/cgroup."""
    paths = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            paths[controllers] = path
    return paths


def _candidates(controller: str) -> list[Path]:
    own = _own_paths()
    out = []
    for mount, kind, options in _mounts():
        if kind == "cgroup" and controller in options.split(","):
            path = next((p for c, p in own.items() if controller in c.split(",")), None)
            if path is not None:
                out.append(Path(mount + path.rstrip("/")))
        elif kind == "cgroup2" and "" in own:
            base = Path(mount + own[""].rstrip("/"))
            with contextlib.suppress(OSError):
                if controller in (base / "cgroup.subtree_control").read_text().split():
                    out.append(base)
    return out


def _sweep(base: Path) -> None:
    """Remove empty cgroups left by servers that died mid-command (their pid is in the name)."""
    for stale in base.glob(f"{PREFIX}*-*"):
        pid = stale.name[len(PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                stale.rmdir()  # fails, harmlessly, if something still runs inside


def _find_root(controller: str, probe_file: str) -> Path | None:
    for base in _candidates(controller):
        _sweep(base)
        probe = base / f"{PREFIX}probe-{os.getpid()}-{os.urandom(3).hex()}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            if (probe / probe_file).exists() and os.access(probe / "cgroup.procs", os.W_OK):
                return base
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
    return None


@dataclass(frozen=True)
class CgroupRoots:
    """Where a command's cgroups are made, per controller (one directory for both under v2)."""

    pids: Path | None
    memory: Path | None

    def missing(self) -> tuple[str, ...]:
        """The limits no cgroup holds here (the names of ``ToolLimits.describe()``-style limits)."""
        return tuple(name for name, root in (("procs", self.pids), ("memory", self.memory)) if root is None)


def find_roots() -> CgroupRoots | None:
    """The writable cgroup directories for each controller, or None when there is neither."""
    pids = _find_root("pids", "pids.max")
    memory = _find_root("memory", "memory.max") or _find_root("memory", "memory.limit_in_bytes")
    return None if pids is None and memory is None else CgroupRoots(pids, memory)


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


class CommandCgroup:
    """One command's cgroup(s): made with its limits, entered by the command, then emptied and removed."""

    def __init__(self, roots: CgroupRoots, procs: int, memory_bytes: int) -> None:
        name = f"{PREFIX}{os.getpid()}-{os.urandom(6).hex()}"
        self.paths: list[Path] = []
        self.pids: Path | None = None
        self.memory: Path | None = None
        try:
            for root in dict.fromkeys(r for r in (roots.pids, roots.memory) if r is not None):
                path = root / name
                path.mkdir()
                self.paths.append(path)
                if root == roots.pids:
                    self.pids = path
                    (path / "pids.max").write_text(str(procs))
                if root == roots.memory:
                    self.memory = path
                    self._limit_memory(path, memory_bytes)
        except BaseException:
            self.destroy()
            raise

    @staticmethod
    def _limit_memory(path: Path, limit: int) -> None:
        if (path / "memory.max").exists():  # v2
            (path / "memory.max").write_text(str(limit))
            _write(path / "memory.swap.max", "0")  # absent without swap accounting: nothing to bypass with
            _write(path / "memory.oom.group", "1")  # an OOM kill ends the whole command, not one process
        else:  # v1: memsw (memory + swap) must be set after, and at least, the memory limit
            (path / "memory.limit_in_bytes").write_text(str(limit))
            _write(path / "memory.memsw.limit_in_bytes", str(limit))

    def enter_argv(self, argv: list[str]) -> list[str]:
        """``argv`` started inside these cgroups (the shell joins them, then becomes ``argv``)."""
        joins = " && ".join(f"echo $$ > {shlex.quote(str(p / 'cgroup.procs'))}" for p in self.paths)
        return ["/bin/sh", "-c", f'{joins} && exec "$@"', "sh", *argv]

    def _counter(self, path: Path | None, file: str, key: str) -> int:
        if path is None:
            return 0
        with contextlib.suppress(OSError, ValueError):
            for line in (path / file).read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        return 0

    def hit_limit(self) -> str | None:
        """``"procs"`` if a fork was refused by ``pids.max``, ``"memory"`` if the OOM killer ran, else None."""
        if self._counter(self.pids, "pids.events", "max") > 0:
            return "procs"
        oom_file = "memory.events" if self.memory is not None and (self.memory / "memory.events").exists() else None
        if self._counter(self.memory, oom_file or "memory.oom_control", "oom_kill") > 0:
            return "memory"
        return None

    def _pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.paths:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
        return sorted(found)

    def destroy(self) -> None:
        """Kill whatever is still inside (detached children too), then remove the cgroups (blocking)."""
        for path in self.paths:
            kill_file = path / "cgroup.kill"  # v2: one write kills the whole cgroup
            if kill_file.exists():
                _write(kill_file, "1")
        left = list(self.paths)
        for attempt in range(200):
            for pid in self._pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            for path in list(left):
                try:
                    path.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    continue  # still busy
                left.remove(path)
            if not left:
                return
            # Killed processes leave the cgroup once the kernel has torn them down: a short wait.
            time.sleep(0.005 * min(attempt + 1, 20))
