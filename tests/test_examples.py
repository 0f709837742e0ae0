"""Every file in ``examples/`` runs as a user would run it, and prints what its docstring promises.

Each example is a real subprocess (``sys.executable examples/<file>``) with its own temporary
``RATH_HOME`` and the repository root as working directory, so the README's snippets cannot rot.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(name: str, home: Path, *args: str, timeout: float = 60) -> str:
    """Run ``examples/<name>`` to completion; fail with its stderr unless it exits 0."""
    env = {**os.environ, "RATH_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    assert not done.stderr.strip() or "Traceback" not in done.stderr, done.stderr
    return done.stdout


def test_every_example_has_a_test_and_a_docstring() -> None:
    tested = set(re.findall(r'run_example\("([\w.]+)"', Path(__file__).read_text()))
    for path in EXAMPLES.glob("*.py"):
        assert path.name in tested or path.name in HELPER_FILES, f"examples/{path.name} is run by no test"
        assert path.read_text().lstrip().startswith('"""'), f"examples/{path.name} needs a docstring"


def test_sessions_fork_merge_keeps_shared_history_once(home: Path) -> None:
    out = run_example("sessions_fork_merge.py", home)
    assert re.search(r"created ses_\w+ with 2 chunks", out)
    merged = re.search(r"merged into (ses_\w+) \(merge, parents (ses_\w+), (ses_\w+)\)", out)
    assert merged, out
    transcript = re.findall(r"^\s+(\w+): (.*)$", out, re.MULTILINE)
    assert transcript == [
        ("system", "You are a careful planner."),
        ("user", "Plan a picnic."),
        ("assistant", "Option A: the park."),
        ("assistant", "Option B: the beach."),
    ]
    assert "lineage: 6 nodes, 6 edges" in out
    assert f"style {merged.group(1)} stroke-width:3px" in out
    assert (home / "rath.db").is_file()


def test_memory_recall_finds_only_matching_items(home: Path) -> None:
    out = run_example("memory_recall.py", home)
    assert re.search(r"recall 'which database does staging use': 1 hit\(s\)\n\s+[\d.]+\s+memory://resources/", out)
    assert "memory://agent/ops/deploys  Deploys happen on Tuesdays" in out
    assert "recall 'favourite colour': 0 hit(s)" in out
    committed = re.search(r"committed (ses_\w+): transcript at memory://session/\1/transcript, (\d+) extracted", out)
    assert committed and int(committed.group(2)) >= 1, out
    assert re.search(rf"'tabs or spaces' finds memory://session/{committed.group(1)}/", out)


HELPER_FILES: set[str] = set()
