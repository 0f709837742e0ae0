"""`--artifacts URL` / `$RATH_ARTIFACTS` on `serve` and `worker`: a bad URL is one line, before anything opens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("how", ["flag", "env"])
@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_bad_artifact_store_url_is_refused_in_one_line(command: str, how: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RATH_ARTIFACTS"}
    args = [sys.executable, "-m", "rath_mcp", command, "--home", str(tmp_path / "home")]
    if how == "flag":
        args += ["--artifacts", "ftp://example/x"]
    else:
        env["RATH_ARTIFACTS"] = "ftp://example/x"
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "ftp://example/x" in line]
    assert len(lines) == 1 and "file:///ABSOLUTE/DIR or s3://BUCKET/PREFIX" in lines[0], done.stderr
    assert not (tmp_path / "home" / "rath.db").exists()  # refused before the store was made


@pytest.mark.parametrize("how", ["flag", "env"])
@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_bad_gc_interval_is_refused_in_one_line(command: str, how: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RATH_ARTIFACT_GC_S"}
    args = [sys.executable, "-m", "rath_mcp", command, "--home", str(tmp_path / "home")]
    if how == "flag":
        args += ["--artifact-gc-interval", "-5"]
    else:
        env["RATH_ARTIFACT_GC_S"] = "hourly"
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "artifact GC interval" in line]
    assert len(lines) == 1 and "--artifact-gc-interval or $RATH_ARTIFACT_GC_S" in lines[0], done.stderr
    assert not (tmp_path / "home" / "rath.db").exists()  # refused before the store was made
