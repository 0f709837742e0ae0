"""With an OTLP endpoint set and the ``otel`` extra missing, ``serve`` and ``worker`` say so in one
line and go on without traces (CONTRACT §12).

The extra is made missing in the child process only: a ``sitecustomize`` on its ``PYTHONPATH``
puts ``None`` in ``sys.modules`` for ``opentelemetry.sdk``, which is how Python marks a module that
cannot be imported (``import`` raises ``ModuleNotFoundError`` naming it), the way an environment
without the package behaves; the OpenTelemetry API the MCP SDK imports stays importable.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXTRA_LINE = "rath-mcp: traces are off: tracing (OTEL_EXPORTER_OTLP_ENDPOINT"
TIMEOUT_S = 60  # a safety net for a process that does not stop (the bug), not a synchronisation


def _without_extra(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text('import sys\nsys.modules["opentelemetry.sdk"] = None\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
    return env


def _said(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "traces are off" in line]


def test_serve_says_the_extra_is_missing_in_one_line_and_serves(home: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rath_mcp", "serve", "--home", str(home)],
        input=b"",  # stdio: the client hangs up at once, and the server stops
        capture_output=True,
        env=_without_extra(tmp_path),
        timeout=TIMEOUT_S,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    said = _said(stderr)
    assert len(said) == 1 and said[0].startswith(EXTRA_LINE), stderr
    assert said[0].endswith("pip install 'rath-mcp[otel]'")


def test_worker_says_the_extra_is_missing_in_one_line_and_works(home: Path, tmp_path: Path) -> None:
    worker = subprocess.Popen(
        [sys.executable, "-m", "rath_mcp", "worker", "--home", str(home), "--workers", "1"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_without_extra(tmp_path),
        text=True,
    )
    lines: list[str] = []
    try:
        assert worker.stderr is not None
        for line in worker.stderr:  # until the worker says it is working
            lines.append(line)
            if "worker on the store" in line:
                break
        worker.terminate()
        _, rest = worker.communicate(timeout=TIMEOUT_S)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    stderr = "".join(lines) + rest
    assert "worker on the store" in stderr, stderr  # it went on, without traces
    said = _said(stderr)
    assert len(said) == 1 and said[0].startswith(EXTRA_LINE), stderr


@pytest.mark.parametrize("disabled", ["true", "TRUE"])
def test_otel_sdk_disabled_turns_tracing_off(disabled: str) -> None:
    from runtime.telemetry import requested

    endpoint = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}
    assert requested(endpoint)
    assert not requested({**endpoint, "OTEL_SDK_DISABLED": disabled})
    assert not requested({})
