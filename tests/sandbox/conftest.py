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
from tests.needs import unavailable

REPO = Path(__file__).resolve().parents[2]
EMULATOR_API_KEY = "emulator-key-" + uuid.uuid4().hex[:8]
HOST_CANARY = "RATH_HOST_CANARY"  # set in the host's environment; a sandbox must never see it
SMALL_CAP = 64_000  # output cap for the test backends, small so truncation tests stay fast
FILE_CAP = 300_000  # read_file limit for the test backends
FLAVOURS = ["local-bwrap", "local-plain", "opensandbox"]

#: Why the bubblewrap tests may skip. Only on a developer machine: .ci/run installs bubblewrap (and
#: stops if it cannot) and sets CI=true, under which a missing bwrap fails these tests instead.
BWRAP_MISSING = shutil.which("bwrap") is None
BWRAP_SKIP_REASON = (
    "bubblewrap is not installed on this machine, and these tests check the isolation it gives "
    "(apt-get install bubblewrap); under CI they fail instead of skipping"
)
needs_bwrap = pytest.mark.skipif(BWRAP_MISSING and not os.environ.get("CI"), reason=BWRAP_SKIP_REASON)


def require_bwrap() -> None:
    """Skip (developer machine) or fail (CI) when bubblewrap is missing."""
    if BWRAP_MISSING:
        unavailable("bubblewrap, whose isolation these tests check", "apt-get install bubblewrap")


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
        require_bwrap()
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
