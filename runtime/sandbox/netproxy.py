"""The host side of a sandbox's network: a small filtering HTTP proxy on a UNIX socket.

A bubblewrap sandbox has its own, empty network namespace. When the policy allows some hosts, the
command's launcher forwards a loopback port inside the sandbox to this proxy's UNIX socket (bound
into the sandbox), and ``HTTP_PROXY``/``HTTPS_PROXY`` point at that port. The proxy then lets
through exactly the allowed ``host:port`` pairs:

- ``CONNECT host:port`` (HTTPS, or any TCP protocol): checked, then the bytes are spliced both ways
  (TLS stays end to end; the proxy never sees inside it);
- ``GET http://host:port/path`` (plain HTTP, absolute form): checked, forwarded in origin form with
  ``Connection: close``, then spliced.

Anything else is answered ``400``; a host not on the list is answered ``403`` with a body that says
how to allow it. Every decision is logged on the ``runtime.sandbox.net`` logger (allowed at INFO,
refused at WARNING). Names are resolved here, on the host: the sandbox has no resolver of its own.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from urllib.parse import urlsplit

import anyio
from anyio.abc import ByteStream, SocketStream

log = logging.getLogger("runtime.sandbox.net")
MAX_HEAD = 64 * 1024
_CONNECT_TIMEOUT_S = 15.0

Allows = Callable[[str, int], bool]


async def _read_head(stream: ByteStream) -> tuple[bytes, bytes] | None:
    """The request head (up to the blank line) and any bytes read past it; None if it never came."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > MAX_HEAD:
            return None
        try:
            buffer += await stream.receive(65536)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return None
    head, _, rest = buffer.partition(b"\r\n\r\n")
    return head, rest


async def _answer(stream: ByteStream, status: str, message: str) -> None:
    body = (message + "\n").encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(head.encode() + body)


async def _pipe(src: ByteStream, dst: ByteStream) -> None:
    with suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        async for chunk in src:
            await dst.send(chunk)
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await dst.send_eof()


async def _splice(a: ByteStream, b: ByteStream) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(_pipe, a, b)
        tg.start_soon(_pipe, b, a)


def _target(method: str, target: str) -> tuple[str, int, str] | None:
    """(host, port, origin-form path) of a proxy request, or None if it is not one."""
    if method == "CONNECT":
        host, sep, port = target.rpartition(":")
        host = host.strip("[]")
        return (host, int(port), "") if sep and host and port.isdigit() else None
    parts = urlsplit(target)
    if parts.scheme != "http" or not parts.hostname:
        return None
    try:
        number = parts.port or 80
    except ValueError:
        return None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.hostname, number, path


def _rewrite(lines: list[str], method: str, path: str, version: str) -> bytes:
    """The request head in origin form, without proxy headers, closing after one exchange."""
    kept = [f"{method} {path} {version}"]
    for line in lines[1:]:
        name = line.split(":", 1)[0].strip().lower()
        if name.startswith("proxy-") or name in ("connection", "keep-alive"):
            continue
        kept.append(line)
    kept.append("Connection: close")
    return ("\r\n".join(kept) + "\r\n\r\n").encode("latin-1")


async def _handle(client: SocketStream, allows: Allows, label: str) -> None:
    async with client:
        got = await _read_head(client)
        if got is None:
            return
        head, rest = got
        lines = head.decode("latin-1").split("\r\n")
        request = lines[0].split()
        parsed = _target(request[0].upper(), request[1]) if len(request) == 3 else None
        if parsed is None:
            log.warning("refused a malformed proxy request from %s: %r", label, lines[0][:200])
            await _answer(client, "400 Bad Request", "rath sandbox proxy: send an absolute http:// URL or CONNECT")
            return
        host, port, path = parsed
        method = request[0].upper()
        if not allows(host, port):
            log.warning("refused %s %s:%s from %s (not in the allow-list)", method, host, port, label)
            await _answer(
                client,
                "403 Forbidden",
                f"rath sandbox: {host}:{port} is not in the network allow-list; "
                f"allow it with --allow-net {host}:{port} (or sandbox.allow_net in config.json)",
            )
            return
        try:
            with anyio.fail_after(_CONNECT_TIMEOUT_S):
                upstream = await anyio.connect_tcp(host, port)
        except (OSError, TimeoutError) as exc:
            log.warning("allowed %s %s:%s from %s, but the connection failed: %s", method, host, port, label, exc)
            await _answer(client, "502 Bad Gateway", f"rath sandbox proxy: cannot reach {host}:{port}: {exc}")
            return
        log.info("allowed %s %s:%s from %s", method, host, port, label)
        async with upstream:
            if method == "CONNECT":
                await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    await upstream.send(rest)
            else:
                await upstream.send(_rewrite(lines, method, path, request[2]) + rest)
            await _splice(client, upstream)


@asynccontextmanager
async def filtering_proxy(socket_path: str, allows: Allows, *, label: str) -> AsyncIterator[None]:
    """Serve the proxy on ``socket_path`` for the duration of the block (one command's lifetime)."""
    listener = await anyio.create_unix_listener(socket_path)
    async with anyio.create_task_group() as tg:

        async def handle(client: SocketStream) -> None:
            # One connection's failure (a reset, a bad port) ends that connection only.
            with suppress(OSError, OverflowError, ValueError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await _handle(client, allows, label)

        tg.start_soon(listener.serve, handle)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()
            await listener.aclose()
