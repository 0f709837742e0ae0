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


def test_durable_run_survives_a_restart_and_resumes_after_approval(home: Path) -> None:
    out = run_example("durable_approval.py", home)
    waiting = re.search(
        r"run (run_\w+) is waiting at step publish: approval \"Publish 'Note: picnic on Saturday'\?\"", out
    )
    assert waiting, out
    assert "after approval the run is succeeded: published=True" in out
    assert "receipt: {'posted': 'Note: picnic on Saturday'}" in out
    events = out.split("events: ")[1].split(", ")
    assert events[0] == "run.created" and "interrupt.created" in events and "interrupt.decided" in events
    assert events.count("effect.succeeded") == 1, "the publish effect must happen exactly once"


def test_mcp_client_drives_custom_workflows_over_stdio(home: Path) -> None:
    out = run_example("mcp_client.py", home)
    workflows = re.search(r"connected \(([\d-]+)\); workflows: (.*)", out)
    assert workflows, out
    assert {"publish", "triage", "echo", "approval"} <= set(workflows.group(2).split(", "))
    assert "triage 'Urgent: the site is down': succeeded via route -> escalate" in out
    assert "triage 'Typo on the About page': succeeded via route -> queue" in out
    assert "publish is waiting: Publish 'Note: picnic'?" in out
    assert "publish after approval: succeeded" in out
    assert "recall 'when is the picnic': The picnic is on Saturday in the park." in out


# my_workflows.py is the --workflows file: mcp_client.py serves it and durable_approval.py imports it.
HELPER_FILES: set[str] = {"my_workflows.py"}
