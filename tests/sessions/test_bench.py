"""The session benchmark runs end to end (ours only, tiny sizes); its numbers are never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_session_benchmark_prints_its_table() -> None:
    args = ["--sizes", "10,50", "--repeats", "2", "--bytes-ops", "3", "--no-peer"]
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "sessions.py"), *args],
        capture_output=True,
        text=True,
        timeout=100,
        check=True,
    ).stdout
    rows = [line.split() for line in out.splitlines() if line[:7].strip() in ("append", "fork", "merge", "read")]
    assert [(r[0], r[1]) for r in rows] == [(op, n) for op in ("append", "fork", "merge", "read") for n in ("10", "50")]
    assert "merged rows at 50: ours 52" in out
