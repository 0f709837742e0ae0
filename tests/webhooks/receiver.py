"""A real HTTP receiver of webhooks on 127.0.0.1 (a thread serving ``http.server``), and an independent
Standard Webhooks verifier (written from the spec, sharing no code with ``runtime.webhooks``).

The receiver answers each POST with the next status of ``codes`` (200 once they run out), records
what it got, and lets a test wait until it has had ``n`` requests.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    path: str


@dataclass
class Receiver:
    url: str = ""
    codes: list[int] = field(default_factory=list)
    got: list[Received] = field(default_factory=list)  # answered
    arrived: list[Received] = field(default_factory=list)  # read, before the answer (which ``hold`` may hold up)
    hold: threading.Event | None = None  # set: answer; unset: hang (a slow receiver)
    on_arrival: Callable[[], None] | None = None  # called in the serving thread as each request is read
    changed: threading.Condition = field(default_factory=threading.Condition)

    async def wait_for(self, n: int, timeout: float = 30.0, *, answered: bool = True) -> list[Received]:
        """The first ``n`` requests answered (``answered=False``: arrived), once there are as many."""
        seen = self.got if answered else self.arrived

        def wait() -> bool:
            with self.changed:
                return self.changed.wait_for(lambda: len(seen) >= n, timeout)

        assert await anyio.to_thread.run_sync(wait), f"the receiver had {len(seen)} requests, expected {n}"
        return list(seen)


@contextmanager
def receiving(
    codes: list[int] | None = None, *, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1", name: str = ""
) -> Iterator[Receiver]:
    """A receiver on ``host`` (an address), over TLS with ``tls``; its URL names ``name`` (default: ``host``)."""
    receiver = Receiver(codes=list(codes or []))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            request = Received({k.lower(): v for k, v in self.headers.items()}, body, self.path)
            if receiver.on_arrival is not None:
                receiver.on_arrival()
            with receiver.changed:
                code = receiver.codes.pop(0) if receiver.codes else 200
                receiver.arrived.append(request)
                receiver.changed.notify_all()
            if receiver.hold is not None:
                receiver.hold.wait(30)
            self.send_response(code)
            self.send_header("content-length", "0")
            self.end_headers()
            with receiver.changed:
                receiver.got.append(request)
                receiver.changed.notify_all()

        def log_message(self, *args: object) -> None:
            pass

    server_class = _ServerV6 if ":" in host else _Server
    server = server_class((host, 0), Handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    shown = name or (f"[{host}]" if ":" in host else host)
    receiver.url = f"{'https' if tls else 'http'}://{shown}:{server.server_address[1]}/hook"
    try:
        yield receiver
    finally:
        if receiver.hold is not None:
            receiver.hold.set()
        server.shutdown()
        server.server_close()


class _Server(ThreadingHTTPServer):
    # socketserver's listen backlog is 5: a sender posting a batch of 20 at once to a receiver
    # whose accepting thread a loaded machine holds up overflows it, and Linux then drops the
    # connection's handshake ACK and later resets it (a ReadError at the sender). Real servers
    # listen with a backlog of hundreds.
    request_queue_size = 128


class _ServerV6(_Server):
    address_family = socket.AF_INET6


def key_of(secret: str) -> bytes:
    """The spec's secret form: ``whsec_`` then the base64 of the key."""
    return base64.b64decode(secret.removeprefix("whsec_"))


def verify(key: bytes, headers: dict[str, str], body: bytes, now: float, tolerance_s: float = 300) -> bool:
    """The Standard Webhooks check, from the spec: the signed content is
    ``{webhook-id}.{webhook-timestamp}.{body}``; ``webhook-signature`` is a space-separated list of
    ``v1,<base64 HMAC-SHA256>``, any of which may match; the timestamp must be recent."""
    msg_id, stamp = headers["webhook-id"], headers["webhook-timestamp"]
    if abs(now - int(stamp)) > tolerance_s:
        return False
    expected = base64.b64encode(hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest())
    for sig in headers["webhook-signature"].split(" "):
        version, _, value = sig.partition(",")
        if version == "v1" and hmac.compare_digest(value.encode(), expected):
            return True
    return False
