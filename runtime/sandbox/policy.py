"""What commands and code run by tools may use: isolation, resource limits, and the network allow-list.

One ``SandboxPolicy`` per runtime, from (later wins) the defaults here, ``config.json``'s ``sandbox``
section, and the CLI flags (``--isolation``, ``--tool-memory``, ``--tool-procs``, ``--tool-file-size``,
``--tool-cpu-s``, ``--allow-net``)::

    {"sandbox": {"isolation": "auto", "memory": "2G", "procs": 256, "file_size": "256M",
                 "cpu_s": 300, "workspace_size": "2G", "allow_net": ["pypi.org", "127.0.0.1:8080"],
                 "workflows": {"agent": {"allow_net": ["api.github.com"]}}}}

A workflow's entry overrides the runtime's policy for the sandboxes its runs use.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from runtime.sandbox.base import SandboxError

ISOLATIONS = ("auto", "bwrap", "none")
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
_HOST = re.compile(r"^(?:\*\.)?[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
DEFAULT_PORTS = (80, 443)  # a host given without a port: plain HTTP and HTTPS


def parse_size(value: int | str, what: str) -> int:
    """``1048576``, ``"512M"``, ``"2G"``, ``"2GiB"`` -> bytes (binary units)."""
    if isinstance(value, bool):
        raise SandboxError(f"{what} must be a size such as 512M or 2G, got {value!r}")
    if isinstance(value, int):
        number = value
    else:
        match = _SIZE.match(str(value))
        if match is None:
            raise SandboxError(f"{what} {value!r} is not a size; use bytes or a number with K, M, G (e.g. 512M, 2G)")
        number = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if number <= 0:
        raise SandboxError(f"{what} must be positive, got {value!r}")
    return number


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().isdigit():
        raise SandboxError(f"{what} must be a positive whole number, got {value!r}")
    number = int(value)
    if number <= 0:
        raise SandboxError(f"{what} must be positive, got {value!r}")
    return number


@dataclass(frozen=True)
class ToolLimits:
    """Per-command limits. ``memory_bytes``: memory of the whole command, all its processes
    together (a memory cgroup, where one can be made: cgroup.py), and address space of each
    process (RLIMIT_AS); ``procs``: processes and threads of one command; ``file_size_bytes``: largest file a command
    may write (RLIMIT_FSIZE; also the size of its private /tmp); ``cpu_s``: CPU seconds of each
    process (RLIMIT_CPU); ``workspace_bytes``: the whole workspace (checked on write_file and after
    each command)."""

    memory_bytes: int = 2 * 1024**3
    procs: int = 256
    file_size_bytes: int = 256 * 1024**2
    cpu_s: int = 300
    workspace_bytes: int = 2 * 1024**3

    def describe(self) -> dict[str, int]:
        return {
            "memory_bytes": self.memory_bytes,
            "procs": self.procs,
            "file_size_bytes": self.file_size_bytes,
            "cpu_s": self.cpu_s,
            "workspace_bytes": self.workspace_bytes,
        }


@dataclass(frozen=True)
class NetTarget:
    """One allowed destination: a host name or address (``*.example.com`` matches its subdomains)
    and the ports allowed on it."""

    host: str
    ports: tuple[int, ...]

    def matches(self, host: str, port: int) -> bool:
        host = host.lower().rstrip(".")
        if port not in self.ports:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        return host == self.host

    def __str__(self) -> str:
        return f"{self.host}:{','.join(map(str, self.ports))}"


def parse_allow_net(spec: str | list[str] | tuple[str, ...] | None) -> tuple[NetTarget, ...]:
    """``"example.com,127.0.0.1:8080,[::1]:9000"`` (or a list of such entries) -> targets.

    A host without a port allows ports 80 and 443."""
    if spec is None:
        return ()
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    targets = []
    for raw in items:
        if not isinstance(raw, str):
            raise SandboxError(f"allow_net entries must be strings such as 'example.com:443', got {raw!r}")
        entry = raw.strip()
        if not entry:
            continue
        host, ports = entry, tuple[int, ...](DEFAULT_PORTS)
        if entry.startswith("["):  # [IPv6]:port
            close = entry.find("]")
            host, rest = entry[1:close], entry[close + 1 :]
            if close < 0 or (rest and not rest.startswith(":")):
                raise SandboxError(f"allow_net entry {entry!r} is not valid; write an IPv6 host as [::1]:8080")
            if rest:
                ports = (_port(rest[1:], entry),)
        elif entry.count(":") == 1:
            host, port = entry.split(":")
            ports = (_port(port, entry),)
        if ":" not in host and not _HOST.match(host):
            raise SandboxError(
                f"allow_net entry {entry!r} is not a host name or address; use HOST[:PORT], e.g. pypi.org:443"
            )
        targets.append(NetTarget(host.lower().rstrip("."), ports))
    return tuple(targets)


def _port(text: str, entry: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise SandboxError(f"allow_net entry {entry!r} has a bad port; use a number from 1 to 65535")
    return int(text)


@dataclass(frozen=True)
class SandboxPolicy:
    """Isolation mode, limits and network allow-list for the commands tools run."""

    isolation: str = "auto"
    limits: ToolLimits = field(default_factory=ToolLimits)
    allow_net: tuple[NetTarget, ...] = ()
    workflows: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.isolation not in ISOLATIONS:
            raise SandboxError(f"isolation {self.isolation!r} is not known; choose one of {', '.join(ISOLATIONS)}")

    def allows(self, host: str, port: int) -> bool:
        return any(t.matches(host, port) for t in self.allow_net)

    def updated(self, settings: dict[str, Any], *, where: str) -> SandboxPolicy:
        """This policy with ``settings`` (config.json keys, None meaning unchanged) applied."""
        known = {"isolation", "memory", "procs", "file_size", "cpu_s", "workspace_size", "allow_net", "workflows"}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise SandboxError(
                f"{where}: unknown sandbox setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        given = {k: v for k, v in settings.items() if v is not None}
        limits = self.limits
        changes: dict[str, Any] = {}
        if "memory" in given:
            changes["memory_bytes"] = parse_size(given["memory"], f"{where}: memory")
        if "file_size" in given:
            changes["file_size_bytes"] = parse_size(given["file_size"], f"{where}: file_size")
        if "workspace_size" in given:
            changes["workspace_bytes"] = parse_size(given["workspace_size"], f"{where}: workspace_size")
        if "procs" in given:
            changes["procs"] = _positive_int(given["procs"], f"{where}: procs")
        if "cpu_s" in given:
            changes["cpu_s"] = _positive_int(given["cpu_s"], f"{where}: cpu_s")
        workflows = given.get("workflows", self.workflows)
        if not isinstance(workflows, dict) or not all(isinstance(v, dict) for v in workflows.values()):
            raise SandboxError(f"{where}: workflows must be an object of workflow name -> sandbox settings")
        return replace(
            self,
            isolation=str(given.get("isolation", self.isolation)),
            limits=replace(limits, **changes),
            allow_net=parse_allow_net(given["allow_net"]) if "allow_net" in given else self.allow_net,
            workflows=workflows,
        )

    def for_workflow(self, name: str | None) -> SandboxPolicy:
        """The policy a workflow's runs get (its config.json entry over this one; isolation stays)."""
        settings = self.workflows.get(name or "")
        if not settings:
            return self
        settings = {k: v for k, v in settings.items() if k not in ("isolation", "workflows")}
        return self.updated(settings, where=f"config.json sandbox.workflows.{name}")


def load_policy(home: Path, overrides: dict[str, Any] | None = None) -> SandboxPolicy:
    """The policy of a home: defaults < ``config.json`` ``sandbox`` < ``overrides`` (CLI flags).

    A ``sandbox`` section with a bad value is an error; a config.json that is not JSON at all gives
    the defaults (the server says once that the file is broken)."""
    policy = SandboxPolicy()
    path = Path(home) / "config.json"
    if path.is_file():
        try:
            config = json.loads(path.read_text("utf-8"))
        except ValueError:
            # The server reports an unreadable config.json once (rath_mcp.cli) and keeps serving; tools
            # then get the defaults, which are the strictest settings (no network, default limits).
            config = {}
        section = config.get("sandbox") if isinstance(config, dict) else None
        if section is not None:
            if not isinstance(section, dict):
                raise SandboxError(f'{path}: \'sandbox\' must be an object, e.g. {{"memory": "2G"}}')
            policy = policy.updated(section, where=f"{path} sandbox")
    return policy.updated(overrides or {}, where="sandbox options")
