"""The opensandbox backend on the wire: auth, reattach by label, and what reaches the server."""

from __future__ import annotations

import logging
import socket

import anyio
import httpx
import pytest

from runtime.sandbox import BackendUnavailableError, FileTooLargeError, SandboxError, SandboxFileNotFoundError
from runtime.sandbox.opensandbox import OpenSandboxBackend, OpenSandboxSettings
from tests.sandbox.conftest import EMULATOR_API_KEY

pytestmark = pytest.mark.anyio


async def test_a_wrong_api_key_is_a_clear_error_that_does_not_echo_the_key(opensandbox_domain: str) -> None:
    backend = OpenSandboxBackend(opensandbox_domain, "wrong-secret-key", namespace="auth")
    with pytest.raises(BackendUnavailableError, match="api key") as caught:
        await backend.open("w")
    await backend.aclose()
    assert "wrong-secret-key" not in str(caught.value)
    assert "wrong-secret-key" not in repr(backend.settings)


async def test_an_unreachable_server_is_a_clear_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = OpenSandboxBackend(f"127.0.0.1:{port}", "k", request_timeout_s=2, ready_timeout_s=2)
    with pytest.raises(BackendUnavailableError, match="opensandbox server"):
        await backend.open("w")
    await backend.aclose()


async def test_open_reattaches_to_the_labelled_container_and_namespaces_keep_homes_apart(
    opensandbox_domain: str,
) -> None:
    alpha = OpenSandboxBackend(opensandbox_domain, EMULATOR_API_KEY, namespace="alpha")
    beta = OpenSandboxBackend(opensandbox_domain, EMULATOR_API_KEY, namespace="beta")
    a1 = await alpha.open("shared-name")
    await a1.write_file("owner.txt", "alpha")
    a2 = await alpha.open("shared-name")
    assert a2.sdk.id == a1.sdk.id
    b = await beta.open("shared-name")
    assert b.sdk.id != a1.sdk.id and not await b.exists("owner.txt")
    for sandbox in (a1, a2, b):
        await sandbox.close()
    await alpha.destroy("shared-name")
    await beta.destroy("shared-name")
    await alpha.destroy("shared-name")  # destroying twice is a no-op
    await alpha.aclose()
    await beta.aclose()


async def test_a_caller_supplied_transport_carries_every_request(opensandbox_domain: str) -> None:
    """The SDK accepts any httpx transport; ours counts what goes through it (and it stays open)."""
    seen: list[str] = []

    class Counting(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            seen.append(f"{request.method} {request.url.path}")
            return await super().handle_async_request(request)

    transport = Counting()
    settings = OpenSandboxSettings(domain=opensandbox_domain, api_key=EMULATOR_API_KEY, namespace="transport")
    backend = OpenSandboxBackend(settings=settings, transport=transport)
    sandbox = await backend.open("w")
    assert (await sandbox.run_command("echo hi", stdin="ignored")).stdout == "hi\n"
    await sandbox.close()
    await backend.destroy("w")
    await backend.aclose()
    await transport.aclose()
    assert "POST /v1/sandboxes" in seen
    assert any(s.startswith("POST /execd/") and s.endswith("/command") for s in seen)
    assert any(s.endswith("/files/upload") for s in seen)  # stdin travelled as an upload
    assert any(s.startswith("DELETE /v1/sandboxes/") for s in seen)


def test_root_dir_must_be_absolute() -> None:
    with pytest.raises(Exception, match="absolute"):
        OpenSandboxBackend("127.0.0.1:1", "k", root_dir="workspace")


async def test_a_missing_file_is_an_answer_not_an_error_log(
    opensandbox_domain: str, caplog: pytest.LogCaptureFixture
) -> None:
    backend = OpenSandboxBackend(opensandbox_domain, EMULATOR_API_KEY, namespace="quiet")
    sandbox = await backend.open("w")
    try:
        with caplog.at_level(logging.WARNING):
            assert not await sandbox.exists("missing.txt")
            with pytest.raises(SandboxFileNotFoundError):
                await sandbox.read_file("missing.txt")
        assert [r.getMessage() for r in caplog.records if r.name.startswith("opensandbox")] == []
    finally:
        await sandbox.close()
        await backend.destroy("w")
        await backend.aclose()


async def test_a_failed_clone_leaves_no_archive_in_the_source(opensandbox_domain: str) -> None:
    backend = OpenSandboxBackend(opensandbox_domain, EMULATOR_API_KEY, namespace="clone-fail", max_file_bytes=1000)
    parent = await backend.open("parent")
    try:
        await parent.write_file("big.bin", b"x" * 5000)  # its archive is over the 1000-byte read limit
        with pytest.raises(FileTooLargeError):
            await backend.clone("parent", "child")
        listing = await parent.run_command(["ls", "-A"])
        assert listing.stdout.split() == ["big.bin"]
    finally:
        await parent.close()
        for name in ("parent", "child"):
            await backend.destroy(name)
        await backend.aclose()


async def test_a_clone_that_fails_to_unpack_removes_the_half_made_copy_so_a_retry_can_run(
    opensandbox_domain: str,
) -> None:
    """The emulator fails `tar -x` in workspaces named full-disk* (as a full disk would)."""
    backend = OpenSandboxBackend(opensandbox_domain, EMULATOR_API_KEY, namespace="clone-unpack")
    parent = await backend.open("parent")
    try:
        await parent.write_file("big.bin", b"x" * 5000)
        with pytest.raises(SandboxError, match=r"could not unpack into workspace 'full-disk-copy': .*No space left"):
            await backend.clone("parent", "full-disk-copy")
        with pytest.raises(SandboxError, match="could not unpack"):  # a retry fails the same way, not "already exists"
            await backend.clone("parent", "full-disk-copy")
        await backend.clone("parent", "copy")
        copy = await backend.open("copy")
        try:
            assert await copy.read_file("big.bin") == b"x" * 5000
        finally:
            await copy.close()
    finally:
        await parent.close()
        for name in ("parent", "full-disk-copy", "copy"):
            await backend.destroy(name)
        await backend.aclose()


async def test_a_start_given_up_on_leaves_no_container_for_the_next_open(opensandbox_domain: str) -> None:
    """The emulator never answers the readiness ping of slow-start* workspaces: the caller's cancel
    (or the ready timeout) must kill the half-started container, not leave it for open() to attach to."""
    backend = OpenSandboxBackend(opensandbox_domain, EMULATOR_API_KEY, namespace="slow", ready_timeout_s=20)
    try:
        with anyio.move_on_after(1) as scope:
            await backend.open("slow-start-w")
        assert scope.cancelled_caught
        assert await backend._find("slow-start-w") is None
        quick = OpenSandboxBackend(opensandbox_domain, EMULATOR_API_KEY, namespace="slow", ready_timeout_s=1)
        with pytest.raises(SandboxError):
            await quick.open("slow-start-w")  # the SDK gives up on readiness itself
        assert await quick._find("slow-start-w") is None
        await quick.aclose()
    finally:
        await backend.destroy("slow-start-w")
        await backend.aclose()
