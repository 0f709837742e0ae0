"""The network allow-list: no network by default, exactly the allowed host:port through the proxy.

Two real HTTP servers on the host's 127.0.0.1 (one allowed, one not) are probed from inside a
bubblewrap sandbox with plain HTTP through ``HTTP_PROXY`` and with a raw ``CONNECT`` tunnel (what
HTTPS clients send), and directly, bypassing the proxy.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from runtime.sandbox.local import LocalBackend, LocalSandbox
from runtime.sandbox.policy import SandboxPolicy, parse_allow_net
from tests.sandbox.conftest import require_bwrap

pytestmark = pytest.mark.anyio


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello from {self.server.server_address[1]} {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[tuple[int, int]]:
    """Two HTTP servers on 127.0.0.1: (allowed port, other port)."""
    made = [ThreadingHTTPServer(("127.0.0.1", 0), _Hello) for _ in range(2)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in made]
    for t in threads:
        t.start()
    yield made[0].server_address[1], made[1].server_address[1]
    for s in made:
        s.shutdown()
        s.server_close()


async def _sandbox(tmp_path: Path, allow: str | None) -> LocalSandbox:
    require_bwrap()
    policy = SandboxPolicy(allow_net=parse_allow_net(allow))
    return await LocalBackend(tmp_path / "ws", use_bwrap=True, policy=policy).open("w")


def _fetch(url: str) -> str:
    """Python run in the sandbox: GET ``url`` via the proxy environment; prints the body or the error."""
    return (
        "import urllib.request, urllib.error\n"
        "try:\n"
        f"    print(urllib.request.urlopen({url!r}, timeout=20).read().decode())\n"
        "except urllib.error.HTTPError as e:\n"
        "    print('http-error', e.code, e.read().decode().strip())\n"
        "except OSError as e:\n"
        "    print('failed', type(e).__name__)\n"
    )


def _tunnel(port: int) -> str:
    """Python run in the sandbox: CONNECT through the proxy, then speak HTTP inside the tunnel."""
    return (
        "import os, socket\n"
        "proxy = os.environ.get('HTTPS_PROXY', 'http://127.0.0.1:3128').rsplit(':', 1)[1]\n"
        "try:\n"
        "    s = socket.create_connection(('127.0.0.1', int(proxy)), timeout=20)\n"
        "except OSError as e:\n"
        "    print('no-proxy', type(e).__name__); raise SystemExit\n"
        f"s.sendall(b'CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\n\\r\\n')\n"
        "head = s.recv(4096).decode()\n"
        "print(head.split('\\r\\n')[0])\n"
        "if ' 200 ' in head:\n"
        f"    s.sendall(b'GET /tunnelled HTTP/1.0\\r\\nHost: 127.0.0.1:{port}\\r\\n\\r\\n')\n"
        "    data = b''\n"
        "    while chunk := s.recv(4096):\n"
        "        data += chunk\n"
        "    print(data.decode().split('\\r\\n\\r\\n', 1)[1])\n"
    )


def _direct(port: int) -> str:
    return (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')\n"
        "except OSError as e:\n"
        "    print('refused')\n"
    )


async def test_by_default_no_host_is_reachable(tmp_path: Path, servers: tuple[int, int]) -> None:
    allowed, _ = servers
    sandbox = await _sandbox(tmp_path, None)
    assert sandbox.capabilities.allow_net == () and not sandbox.capabilities.network
    fetched = await sandbox.run_code(_fetch(f"http://127.0.0.1:{allowed}/x"))
    assert fetched.stdout.startswith("failed"), fetched
    assert (await sandbox.run_code(_direct(allowed))).stdout == "refused\n"
    assert (await sandbox.run_code(_tunnel(allowed))).stdout.startswith("no-proxy")


async def test_an_allowed_host_is_reachable_over_http_and_connect_and_another_port_is_refused(
    tmp_path: Path, servers: tuple[int, int], caplog: pytest.LogCaptureFixture
) -> None:
    allowed, other = servers
    sandbox = await _sandbox(tmp_path, f"127.0.0.1:{allowed}")
    assert sandbox.capabilities.allow_net == (f"127.0.0.1:{allowed}",)
    with caplog.at_level(logging.INFO, logger="runtime.sandbox.net"):
        got = await sandbox.run_code(_fetch(f"http://127.0.0.1:{allowed}/page?q=1"))
        assert got.stdout == f"hello from {allowed} /page?q=1\n", got
        tunnelled = await sandbox.run_code(_tunnel(allowed))
        assert tunnelled.stdout == f"HTTP/1.1 200 Connection established\nhello from {allowed} /tunnelled\n", tunnelled

        refused = await sandbox.run_code(_fetch(f"http://127.0.0.1:{other}/x"))
        assert refused.stdout.startswith("http-error 403"), refused
        assert f"--allow-net 127.0.0.1:{other}" in refused.stdout
        assert (await sandbox.run_code(_tunnel(other))).stdout.startswith("HTTP/1.1 403")
        elsewhere = await sandbox.run_code(_fetch(f"http://localhost:{allowed}/x"))  # another name: not on the list
        assert elsewhere.stdout.startswith("http-error 403"), elsewhere

        assert (await sandbox.run_code(_direct(allowed))).stdout == "refused\n"  # only through the proxy
    messages = [r.getMessage() for r in caplog.records if r.name == "runtime.sandbox.net"]
    assert f"allowed GET 127.0.0.1:{allowed} from workspace w" in messages
    assert f"allowed CONNECT 127.0.0.1:{allowed} from workspace w" in messages
    assert f"refused GET 127.0.0.1:{other} from workspace w (not in the allow-list)" in messages
    assert f"refused CONNECT 127.0.0.1:{other} from workspace w (not in the allow-list)" in messages
    assert f"refused GET localhost:{allowed} from workspace w (not in the allow-list)" in messages


def test_allow_list_entries_parse_with_default_ports_and_wildcards() -> None:
    targets = parse_allow_net("Example.COM, 127.0.0.1:8080,[::1]:9000,*.pypi.org:443")
    assert [str(t) for t in targets] == ["example.com:80,443", "127.0.0.1:8080", "::1:9000", "*.pypi.org:443"]
    policy = SandboxPolicy(allow_net=targets)
    assert policy.allows("example.com", 443) and not policy.allows("example.com", 8443)
    assert policy.allows("files.pypi.org", 443) and not policy.allows("pypi.org.evil.com", 443)
    assert policy.allows("::1", 9000) and not policy.allows("127.0.0.2", 8080)
