"""Which URLs a run may notify, and the address a notification connects to (no SSRF).

A notify URL must be ``https``, unless its host is one the operator named (``--allow-webhook-hosts``,
or ``config.json``'s ``webhooks.allow_hosts``):
named hosts may also be plain ``http`` and resolve to private addresses (a receiver on the same
machine or network, as in tests). Any other host's addresses are resolved and every one is checked:
private, loopback, link-local, multicast, reserved or unspecified addresses are refused (a URL must
not reach into the servers' own network). The sender connects to the very address it checked (the
URL's host still names the TLS certificate and the ``Host`` header), so a name that resolves
differently a moment later (DNS rebinding) cannot slip past the check.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import anyio

from runtime.errors import InvalidInputError

ALLOW_FLAG = "--allow-webhook-hosts"
MAX_URL = 2048

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_hosts(text: str | Iterable[str] | None) -> frozenset[str]:
    """Host names from ``--allow-webhook-hosts`` (comma-separated, or a list), lower-cased."""
    if text is None:
        return frozenset()
    parts = text.split(",") if isinstance(text, str) else list(text)
    hosts = {p.strip().lower().strip("[]") for p in parts if p.strip()}
    for host in hosts:
        if "/" in host or (":" in host and not _is_ip(host)):
            raise InvalidInputError(f"{ALLOW_FLAG}: {host!r} is not a host name; give names such as hooks.example.com")
    return frozenset(hosts)


def hosts_from_config(home: Path) -> frozenset[str]:
    """``config.json``'s ``{"webhooks": {"allow_hosts": ["hooks.internal", ...]}}`` (added to the flag's).

    A malformed section is an error; a config.json that is not JSON at all names none (the server
    reports the file once, as for its other sections)."""
    path = home / "config.json"
    try:
        config = json.loads(path.read_text("utf-8")) if path.is_file() else {}
    except ValueError:
        return frozenset()
    section = config.get("webhooks") if isinstance(config, dict) else None
    if section is None:
        return frozenset()
    hosts = section.get("allow_hosts", []) if isinstance(section, dict) else None
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise InvalidInputError(f'{path}: "webhooks" must be {{"allow_hosts": ["host", ...]}}, a list of host names')
    return parse_hosts(hosts)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _forbidden(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return bool(
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved or ip.is_unspecified
    )


@dataclass(frozen=True, slots=True)
class Target:
    """A checked URL: its parts, and the address to connect to."""

    url: str
    scheme: str
    host: str
    port: int
    address: str

    def connect_url(self) -> str:
        """The URL with the checked address in place of the host (the path and query kept)."""
        parts = urlsplit(self.url)
        shown = f"[{self.address}]" if ":" in self.address else self.address
        return parts._replace(netloc=f"{shown}:{self.port}").geturl()

    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        name = f"[{self.host}]" if ":" in self.host else self.host
        return name if self.port == default else f"{name}:{self.port}"


@dataclass(frozen=True, slots=True)
class WebhookPolicy:
    """The hosts named by the operator; every other URL must be https to a public address."""

    allowed_hosts: frozenset[str] = frozenset()

    def check_form(self, url: str) -> tuple[str, str, int]:
        """The URL's scheme, host and port, or why it may not be notified (before any DNS)."""
        if not isinstance(url, str) or not url or len(url) > MAX_URL:
            raise InvalidInputError(f"notify_url must be an https URL of at most {MAX_URL} characters")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise InvalidInputError(f"notify_url {url!r} is not a valid URL ({exc})") from None
        host = (parts.hostname or "").lower()
        if parts.scheme not in ("https", "http") or not host:
            raise InvalidInputError(f"notify_url {url!r} must be an https:// URL with a host")
        if parts.username or parts.password:
            raise InvalidInputError("notify_url must not carry a user name or password")
        if parts.scheme == "http" and host not in self.allowed_hosts:
            raise InvalidInputError(
                f"notify_url {url!r} is plain http: use https, or name the host {host!r} in {ALLOW_FLAG}"
            )
        return parts.scheme, host, port or (443 if parts.scheme == "https" else 80)

    async def resolve(self, url: str) -> Target:
        """The URL checked and resolved: the address to connect to, or why not (``InvalidInputError``)."""
        scheme, host, port = self.check_form(url)
        try:
            found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise InvalidInputError(f"notify_url host {host!r} does not resolve ({exc})") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
        if not addresses:
            raise InvalidInputError(f"notify_url host {host!r} has no address")
        if host not in self.allowed_hosts:
            refused = [a for a in addresses if _forbidden(ipaddress.ip_address(a.split("%")[0]))]
            if refused:
                raise InvalidInputError(
                    f"notify_url host {host!r} resolves to {refused[0]}, a private, loopback or link-local "
                    f"address: refused (name the host in {ALLOW_FLAG} if it is yours)"
                )
        return Target(url, scheme, host, port, addresses[0])
