"""``rath-mcp demo`` as a new user runs it: a real subprocess, its output read line by line.

It must tour what CONTRACT §3 lists (create, fork, merge, a run that pauses on an interrupt and
resumes, memory recall, lineage, an agent using tools), stay offline whatever provider the user's
environment names, show every id whole, and pass to a tool only ids it has shown before.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ID_LIKE = re.compile(r"\b(?:ses|run|int|mem|eff)_[0-9a-f]{4,}\w*")  # an id, or what is left of a cut one
FULL_ID = re.compile(r"(?:ses|run|int|mem|eff)_[0-9a-f]{24}")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def demo() -> list[str]:
    """The demo's stdout lines, run with a real provider configured that cannot be reached:
    the demo must not use it (it chooses the scripted provider for its agent step itself)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RATH_", "OPENAI_", "ANTHROPIC_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        RATH_PROVIDER="openai",
        OPENAI_BASE_URL=f"http://127.0.0.1:{closed_port()}/v1",
    )
    done = subprocess.run(
        [sys.executable, "-m", "rath_mcp", "demo"], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return done.stdout.splitlines()


def test_every_id_shown_is_whole(demo: list[str]) -> None:
    ids = [m.group(0) for line in demo for m in ID_LIKE.finditer(line)]
    assert len(ids) > 30
    assert [i for i in ids if not FULL_ID.fullmatch(i)] == []
    assert not any(re.search(FULL_ID.pattern + "…", line) for line in demo)


def test_every_id_passed_to_a_tool_was_shown_before(demo: list[str]) -> None:
    seen: set[str] = set()
    for number, line in enumerate(demo):
        found = set(FULL_ID.findall(line))
        if line.lstrip().startswith("→"):
            unseen = found - seen
            assert not unseen, f"line {number + 1} passes {sorted(unseen)} before the demo showed them: {line}"
        seen |= found


def test_the_tour_shows_each_part_of_the_contract(demo: list[str]) -> None:
    text = "\n".join(demo)
    for call in (
        "session_create",
        "session_fork",
        "session_append",
        "session_merge",
        "run_start",
        "interrupt_resolve",
        "run_wait",
        "memory_remember",
        "memory_recall",
        "session_lineage",
    ):
        assert f"→ {call}(" in text, call
    assert re.search(r"← run_\w+ is waiting at step review", text)
    assert re.search(r"← run_\w+ succeeded; output session ses_\w+", text)
    scores = [float(m) for m in re.findall(r"score (\d+\.\d+)", text)]
    assert scores and all(s > 0.1 for s in scores)  # meaningful BM25 scores, not FTS5's ~1e-06
    assert "graph TD" in text


def test_the_agent_uses_real_tools_in_its_workspace_offline(demo: list[str]) -> None:
    start = next(i for i, line in enumerate(demo) if "workflow `agent`" in line)
    part = "\n".join(demo[start:])
    assert "`scripted` provider, chosen for this demo" in part  # the reader is told it is not a model
    assert re.search(r"← run_\w+ succeeded", part)
    assert "(local sandbox, workspace picnic)" in part
    assert "write_file:  wrote 48 bytes to shopping.py" in part
    assert "run_command:  exit 0, printed: bread | fruit" in part  # the command really ran
    assert "list_files:  files: shopping.py (48 bytes)" in part
