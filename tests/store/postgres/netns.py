"""Worker "hosts" on one machine: network namespaces joined to the machine by veth pairs.

``hosts(n)`` makes ``n`` namespaces (``ip netns add``), each with a veth pair whose inner end has an
address of a /30 of its own and whose outer end, in the machine's namespace, has the other; it
removes them all when the block ends, however it ends (a namespace goes with its veth pair). A
process in a namespace reaches the machine only through the outer address: PostgreSQL listens on
localhost, so a delaying proxy (``delay_proxy.py``) listens there and carries the connections on.

``Host.command(argv)`` runs ``argv`` as if on another machine: in the namespace (its network), and
under ``unshare`` in a pid and UTS namespace of its own (a hostname of its own, and a pid namespace,
which ``runtime.durable.owner`` counts as another host: no worker here can see its processes, so a
run it held is recovered by its lease, as across machines). ``--kill-child``: killing the command's
process (``unshare``) kills everything in it.

Names carry this process's pid (``rath<pid>h<i>``), so concurrent runs never collide, and a run
that was killed before it could clean up is cleaned by the next one (its pid no longer lives).
Needs root and ``ip`` (iproute2): ``require`` skips without them on a developer's machine and fails
under CI.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

PREFIX = "rath"
_NAME = re.compile(rf"^{PREFIX}(\d+)h(\d+)$")


@dataclass(frozen=True)
class Host:
    name: str  # the namespace's, the hostname's, and the outer veth's
    outer: str  # the machine's address on this host's link: what processes in the namespace connect to
    inner: str  # the namespace's own address

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run in this host's network namespace, with a pid namespace and hostname of its own."""
        inner = " ".join(_quote(a) for a in argv)
        return [
            "ip", "netns", "exec", self.name,
            "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--uts",
            "sh", "-c", f"hostname {self.name} && exec {inner}",
        ]  # fmt: skip


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def why_not() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "root (to make network namespaces)"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"the {tool!r} command"
    return None


def _names() -> list[str]:
    found = subprocess.run(["ip", "netns", "list"], check=True, capture_output=True, text=True).stdout
    return [line.split()[0] for line in found.splitlines() if line.strip()]


def _remove(name: str) -> None:
    subprocess.run(["ip", "netns", "delete", name], capture_output=True)
    subprocess.run(["ip", "link", "delete", name], capture_output=True)  # gone with the namespace, if not


def _clean_leftovers() -> None:
    """Remove the namespaces of runs whose process is gone (killed before its own cleanup)."""
    for name in _names():
        found = _NAME.match(name)
        if found and not os.path.exists(f"/proc/{found.group(1)}"):
            _remove(name)


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.200.0.0/13 that no interface of the machine uses."""
    used = subprocess.run(["ip", "-4", "-o", "addr", "show"], check=True, capture_output=True, text=True).stdout
    taken = [ipaddress.ip_interface(a).network for a in re.findall(r"inet (\S+)", used)]
    for _ in range(100):
        subnet = ipaddress.IPv4Network(f"10.{random.randrange(200, 208)}.{random.randrange(256)}.0/24")
        if not any(subnet.overlaps(t) for t in taken):
            return subnet
    raise RuntimeError("no free 10.200.0.0/13 subnet for the hosts' links")


@contextmanager
def hosts(count: int) -> Iterator[list[Host]]:
    """``count`` hosts (namespaces with a veth link to this machine), removed when the block ends."""
    _clean_leftovers()
    subnet = _free_subnet()
    made: list[str] = []
    try:
        out: list[Host] = []
        for i in range(count):
            name = f"{PREFIX}{os.getpid()}h{i}"
            outer, inner = (str(subnet[4 * i + k]) for k in (1, 2))
            _ip("netns", "add", name)
            made.append(name)
            _ip("link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", name)
            _ip("addr", "add", f"{outer}/30", "dev", name)
            _ip("link", "set", name, "up")
            _ip("-n", name, "addr", "add", f"{inner}/30", "dev", "eth0")
            _ip("-n", name, "link", "set", "eth0", "up")
            _ip("-n", name, "link", "set", "lo", "up")
            out.append(Host(name, outer, inner))
        yield out
    finally:
        for name in made:
            _remove(name)


def tear_down(host: Host) -> None:
    """Remove one host's namespace and link now (its processes must be gone: a live one keeps it)."""
    _remove(host.name)
