"""Ports for the servers a test starts that cannot pick their own (PostgreSQL's ``-p``, SeaweedFS's
``-*.port``): free when picked, and below the range the kernel takes the local ports of connections
from (``/proc/sys/net/ipv4/ip_local_port_range``).

A port picked by ``bind(("127.0.0.1", 0))`` comes from that range. Until the server binds it (seconds
later, after its start-up), and again whenever a test stops the server and starts it on the same
port, any connection made on the machine may be given it as its local port (another test run's, a
benchmark's, the test's own reconnecting clients'; a client connecting to a stopped server from that
very port even connects to itself), and the server then cannot bind it. Below the range, only a
program that binds that very port could take it. (A server that can pick its own port, such as
``rath-mcp serve --port 0``, is started that way instead: see ``tests/transports/_servers.py``.)
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_low() -> int:
    """The lowest port the kernel gives connections (Linux's default range starts at 32768)."""
    try:
        return int(RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def quiet_ports(count: int, *, plus: int = 0) -> list[int]:
    """``count`` distinct ports of 127.0.0.1 free now, from the upper half below the ephemeral range;
    with ``plus``, each port's ``port + plus`` is free and below that range too (SeaweedFS puts each
    server's gRPC port 10000 above its HTTP port)."""
    low = ephemeral_low()
    candidates = range(low // 2, low - plus)
    if len(candidates) < count:
        raise AssertionError(f"no room below the ephemeral range (from {low}) for {count} port(s) +{plus}")
    found: list[int] = []
    for port in random.sample(candidates, min(len(candidates), 50 * count)):
        if port in found or port + plus in found or any(port == f + plus for f in found):
            continue
        if _free(port) and (plus == 0 or _free(port + plus)):
            found.append(port)
            if len(found) == count:
                return found
    raise AssertionError(f"no {count} free port(s) found below {low}")
