"""The OpenRath 2.0.0 peer: a virtual environment of its own, made on first use, for side-by-side runs.

Every benchmark that compares against OpenRath calls ``openrath_python()`` and runs the peer's
code in that interpreter as a subprocess, so OpenRath's dependencies never meet ours.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

PEER_VERSION = "openrath==2.0.0"
VENV = Path(__file__).resolve().parent / ".venvs" / "openrath"
PEERS = Path(__file__).resolve().parents[2] / "shared" / "peers"


def openrath_python() -> Path:
    """Path of a Python that can ``import rath`` (OpenRath 2.0.0), creating its venv if needed."""
    python = VENV / "bin" / "python"
    if python.exists() and _has_rath(python):
        return python
    print(f"[bench] creating {VENV} with {PEER_VERSION} (first run only)", file=sys.stderr)
    venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    subprocess.run([str(python), "-m", "pip", "install", "-q", PEER_VERSION], check=True)
    if not _has_rath(python):
        raise SystemExit(f"{PEER_VERSION} installed but `import rath` fails in {VENV}")
    return python


def _has_rath(python: Path) -> bool:
    return subprocess.run([str(python), "-c", "import rath"], capture_output=True).returncode == 0


def run_peer(code: str, *args: str, timeout: float = 1800) -> str:
    """Run Python ``code`` with OpenRath's interpreter and return its stdout."""
    out = subprocess.run(
        [str(openrath_python()), "-c", code, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"OpenRath peer failed:\n{out.stderr[-4000:]}")
    return out.stdout
