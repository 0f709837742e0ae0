"""A ``pids`` cgroup per command, where the kernel lets us make one (a root server, usually).

Why: RLIMIT_NPROC is not checked for processes whose host uid is 0 (the kernel exempts root's own
user), and a root server's bubblewrap maps the sandbox's uid onto host uid 0. So for a root server
the process limit is a cgroup's ``pids.max`` instead, which also lets the host kill every process of
a command, however it detached. cgroup v1 (a ``pids`` hierarchy) and v2 (a cgroup whose
``cgroup.subtree_control`` has ``pids``) both work; when neither is writable, ``find_pids_root``
returns None and the caller falls back to RLIMIT_NPROC (effective for a non-root server).

A command enters its cgroup before it starts: it is launched as ``sh -c 'echo $$ > cgroup.procs;
exec "$@"'``, so no child can be forked outside it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

PREFIX = "rath-"


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


def _candidates() -> list[Path]:
    own = _own_paths()
    out = []
    for mount, kind, options in _mounts():
        if kind == "cgroup" and "pids" in options.split(","):
            path = next((p for c, p in own.items() if "pids" in c.split(",")), None)
            if path is not None:
                out.append(Path(mount + path.rstrip("/")))
        elif kind == "cgroup2" and "" in own:
            base = Path(mount + own[""].rstrip("/"))
            with contextlib.suppress(OSError):
                if "pids" in (base / "cgroup.subtree_control").read_text().split():
                    out.append(base)
    return out


def _sweep(base: Path) -> None:
    """Remove empty cgroups left by servers that died mid-command (their pid is in the name)."""
    for stale in base.glob(f"{PREFIX}*-*"):
        pid = stale.name[len(PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                stale.rmdir()  # fails, harmlessly, if something still runs inside


def find_pids_root() -> Path | None:
    """A cgroup directory under which we may make child cgroups with ``pids.max``, or None."""
    for base in _candidates():
        _sweep(base)
        probe = base / f"{PREFIX}probe-{os.getpid()}-{os.urandom(3).hex()}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            if (probe / "pids.max").exists() and os.access(probe / "cgroup.procs", os.W_OK):
                return base
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
    return None


class PidsCgroup:
    """One command's cgroup: made with a limit, entered by the command, then emptied and removed."""

    def __init__(self, root: Path, limit: int) -> None:
        self.path = root / f"{PREFIX}{os.getpid()}-{os.urandom(6).hex()}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(limit))

    @property
    def procs_file(self) -> str:
        return str(self.path / "cgroup.procs")

    def enter_argv(self, argv: list[str]) -> list[str]:
        """``argv`` started inside this cgroup (the shell joins it, then becomes ``argv``)."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', self.procs_file, *argv]

    def hit_limit(self) -> bool:
        """Whether a fork was refused because of ``pids.max``."""
        with contextlib.suppress(OSError, ValueError):
            for line in (self.path / "pids.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "max":
                    return int(value) > 0
        return False

    def _pids(self) -> list[int]:
        with contextlib.suppress(OSError):
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        return []

    def destroy(self) -> None:
        """Kill whatever is still inside (detached children too), then remove the cgroup (blocking)."""
        kill_file = self.path / "cgroup.kill"  # v2: one write kills the whole cgroup
        with contextlib.suppress(OSError):
            if kill_file.exists():
                kill_file.write_text("1")
        for attempt in range(200):
            pids = self._pids()
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return
            except OSError:
                # Killed processes leave the cgroup once the kernel has torn them down: a short wait.
                time.sleep(0.005 * min(attempt + 1, 20))
