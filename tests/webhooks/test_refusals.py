"""A notify_url the server may not notify is a clear error at run_start, and nothing is written.

Only https, or a host named in ``--allow-webhook-hosts``; after DNS, no private, loopback or link-local
address unless the host is named (no SSRF); and nothing at all without a signing secret.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime import Runtime
from runtime.errors import InvalidInputError
from runtime.store import StoreURL
from runtime.webhooks.targets import hosts_from_config
from tests.doc_text import DOCS, blocks
from tests.webhooks.conftest import SECRET

pytestmark = pytest.mark.anyio

REFUSED = [
    ("http://127.0.0.1:9/hook", r"plain http: use https, or name the host '127.0.0.1' in --allow-webhook-hosts"),
    ("https://127.0.0.1:9/hook", r"resolves to 127.0.0.1, a private, loopback or link-local address"),
    ("https://localhost/hook", r"host 'localhost' resolves to .*(127\.0\.0\.1|::1).*refused"),
    ("https://10.1.2.3/hook", r"resolves to 10.1.2.3"),
    ("https://169.254.169.254/latest/meta-data", r"resolves to 169.254.169.254"),
    ("https://[::1]/hook", r"resolves to ::1"),
    ("https://[::ffff:192.168.0.1]/hook", r"resolves to ::ffff:192.168.0.1"),
    ("ftp://example.com/hook", r"must be an https:// URL"),
    ("https://user:pw@example.com/hook", r"must not carry a user name or password"),
    ("https://no-such-host.invalid/hook", r"'no-such-host.invalid' does not resolve"),
]


async def test_refused_urls_are_errors_at_run_start_and_write_nothing(tmp_path: Path, store_url: StoreURL) -> None:
    async with Runtime.open(tmp_path / "home", store=store_url, workers=0, allow_webhook_hosts="hooks.internal") as rt:
        for url, message in REFUSED:
            with pytest.raises(InvalidInputError, match=message):
                await rt.runs.start("echo", input={"message": "hi"}, notify_url=url)
        runs, _ = await rt.runs.list(limit=10)
        assert runs == []


async def test_a_named_host_may_be_plain_http_and_private(tmp_path: Path, store_url: StoreURL) -> None:
    async with Runtime.open(tmp_path / "home", store=store_url, workers=0, allow_webhook_hosts="127.0.0.1") as rt:
        run = await rt.runs.start("echo", input={"message": "hi"}, notify_url="http://127.0.0.1:9/hook")
        assert (await rt.runs.get(run.id)).status == "queued"
        with pytest.raises(InvalidInputError, match=r"resolves to 127\.0\.0\.1"):  # named by address, not by name
            await rt.runs.start("echo", input={"message": "hi"}, notify_url="https://localhost:9/hook")


async def test_without_a_secret_a_notify_url_is_an_error_naming_it(
    tmp_path: Path, store_url: StoreURL, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RATH_WEBHOOK_SECRET")
    async with Runtime.open(tmp_path / "home", store=store_url, workers=0, allow_webhook_hosts="127.0.0.1") as rt:
        assert rt.webhooks.sender is None  # nothing to sign with: this process sends nothing
        with pytest.raises(InvalidInputError, match=r"set \$RATH_WEBHOOK_SECRET"):
            await rt.runs.start("echo", input={"message": "hi"}, notify_url="http://127.0.0.1:9/hook")
        assert (await rt.runs.list(limit=10))[0] == []


async def test_a_malformed_secret_or_host_list_stops_the_runtime_opening(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATH_WEBHOOK_SECRET", "whsec_not base64!")
    with pytest.raises(InvalidInputError, match="RATH_WEBHOOK_SECRET starts with whsec_ but the rest is not base64"):
        async with Runtime.open(tmp_path / "home"):
            pass
    monkeypatch.setenv("RATH_WEBHOOK_SECRET", "short")
    with pytest.raises(InvalidInputError, match="RATH_WEBHOOK_SECRET is too short"):
        async with Runtime.open(tmp_path / "home"):
            pass
    monkeypatch.setenv("RATH_WEBHOOK_SECRET", SECRET)
    with pytest.raises(InvalidInputError, match="--allow-webhook-hosts: 'http://x' is not a host name"):
        async with Runtime.open(tmp_path / "home", allow_webhook_hosts="ok.example, http://x"):
            pass


async def test_config_json_names_hosts_too(tmp_path: Path, store_url: StoreURL) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.json").write_text(json.dumps({"webhooks": {"allow_hosts": ["127.0.0.1"]}}))
    async with Runtime.open(home, store=store_url, workers=0) as rt:
        run = await rt.runs.start("echo", input={"message": "hi"}, notify_url="http://127.0.0.1:9/hook")
        assert run.status == "queued"
    (home / "config.json").write_text(json.dumps({"webhooks": {"allow_hosts": "127.0.0.1"}}))
    with pytest.raises(InvalidInputError, match=r'"webhooks" must be \{"allow_hosts": \["host", \.\.\.\]\}'):
        async with Runtime.open(home, store=store_url, workers=0):
            pass


def test_the_docs_config_section_is_what_the_server_reads(tmp_path: Path) -> None:
    (shown,) = [b for b in blocks(DOCS / "webhooks.md", "json") if '"webhooks"' in b]
    (tmp_path / "config.json").write_text(shown)
    assert hosts_from_config(tmp_path) == {"hooks.internal", "127.0.0.1"}
