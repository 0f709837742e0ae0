"""A worker's ready line is a promise: SIGTERM any time after it stops the worker cleanly (exit 0).

The line used to be printed before the worker took SIGINT/SIGTERM for itself, so a supervisor that
stopped it as soon as it read the line could kill it with the signal's default action instead.
"""

from __future__ import annotations

import signal
from pathlib import Path

import anyio
import pytest

from tests.cli.serving import WAIT_S, rath_argv, running

pytestmark = pytest.mark.anyio


async def test_sigterm_right_after_the_ready_line_stops_the_worker_cleanly(tmp_path: Path) -> None:
    for attempt in range(3):  # each try races the signal against the line; none may lose
        home = tmp_path / f"home{attempt}"
        async with running(rath_argv("worker", "--home", str(home), "--workers", "1")) as worker:
            await worker.line_with(r"^rath-mcp: worker on the store ")
            worker.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(WAIT_S):
                code = await worker.process.wait()
            assert code == 0, "\n".join(worker.lines)
            await worker.line_with("worker stopped")
