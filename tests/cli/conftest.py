"""Helpers of the CLI tests: run ``rath-mcp`` in this process (``main(argv)``) or as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rath_mcp.cli import main

ROOT = Path(__file__).resolve().parents[2]


def rath_here(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``rath-mcp ARGV`` in this process: exit code, stdout, stderr."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse ends usage errors (and --help, --version) this way
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def rath_process(
    *argv: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``rath-mcp ARGV`` as a real process (stdin closed, so ``serve`` over stdio ends at once)."""
    full_env = {k: v for k, v in os.environ.items() if k != "RATH_HOME"}
    full_env.update({"PYTHONUNBUFFERED": "1", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "rath_mcp", *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd or ROOT,
        timeout=120,
        check=False,
    )


def one_error_line(stderr: str) -> str:
    """The single line an error printed (asserting it is one line and no traceback)."""
    lines = stderr.strip().splitlines()
    errors = [line for line in lines if "error:" in line]
    assert "Traceback" not in stderr, stderr
    assert len(errors) == 1 and lines[-1] == errors[0], stderr
    return errors[0]
