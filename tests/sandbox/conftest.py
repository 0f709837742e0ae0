"""Fixtures for the sandbox tests: one backend per flavour, so conformance bodies run against all.

Flavours: ``local-bwrap`` (bubblewrap isolation), ``local-plain`` (no bubblewrap) and
``opensandbox`` (the real SDK over TCP to the emulator in ``tests.emulators.opensandbox_server``,
started once per session as a subprocess on 127.0.0.1, with an api key it enforces).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from runtime.sandbox import Backend, Sandbox
from runtime.sandbox.local import LocalBackend
from runtime.sandbox.opensandbox import OpenSandboxBackend

REPO = Path(__file__).resolve().parents[2]
EMULATOR_API_KEY = "emulator-key-" + uuid.uuid4().hex[:8]
HOST_CANARY = "RATH_HOST_CANARY"  # set in the host's environment; a sandbox must never see it
SMALL_CAP = 64_000  # output cap for the test backends, small so truncation tests stay fast
FILE_CAP = 300_000  # read_file limit for the test backends
FLAVOURS = ["local-bwrap", "local-plain", "opensandbox"]


@pytest.fixture(scope="session")
def opensandbox_domain() -> Iterator[str]:
    """``host:port`` of a running emulator (a real HTTP server in a child process)."""
    env = {**os.environ, HOST_CANARY: "leaked-from-emulator-host", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.emulators.opensandbox_server", "--api-key", EMULATOR_API_KEY],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the socket is bound and about to serve
        assert line.startswith("LISTENING http://"), f"emulator did not start: {line!r}"
        yield line.split("//", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def make_backend(flavour: str, root: Path, request: pytest.FixtureRequest) -> Backend:
    if flavour == "local-bwrap":
        if shutil.which("bwrap") is None:
            pytest.skip("bubblewrap is not installed here (CI installs it: apt-get install bubblewrap)")
        return LocalBackend(root, use_bwrap=True, max_output_bytes=SMALL_CAP, max_file_bytes=FILE_CAP)
    if flavour == "local-plain":
        return LocalBackend(root, use_bwrap=False, max_output_bytes=SMALL_CAP, max_file_bytes=FILE_CAP)
    domain = request.getfixturevalue("opensandbox_domain")
    # A namespace per test keeps tests apart on the shared emulator.
    return OpenSandboxBackend(
        domain,
        EMULATOR_API_KEY,
        namespace="t" + uuid.uuid4().hex[:12],
        max_output_bytes=SMALL_CAP,
        max_file_bytes=FILE_CAP,
        ready_timeout_s=10,
    )


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def backend(flavour: str, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """A fresh backend of each flavour; every workspace a test opens is destroyed afterwards."""
    made = make_backend(flavour, tmp_path / "workspaces", request)
    yield made
    for name in ("conf", "one", "two", "child", "parent", "copy"):
        await made.destroy(name)
    if isinstance(made, OpenSandboxBackend):
        await made.aclose()


@pytest.fixture
async def sandbox(backend: Backend) -> AsyncIterator[Sandbox]:
    opened = await backend.open("conf")
    try:
        yield opened
    finally:
        await opened.close()
