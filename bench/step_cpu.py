"""CPU per committed no-op durable step on SQLite, counted in instructions (one command).

    .venv/bin/python -m bench.step_cpu [--steps 60,260] [--peer]

Wall time on a shared 2-core machine swings with whatever else runs; the instructions a process
executes do not, so this counts them with ``valgrind --tool=callgrind`` (every thread of the
process, summed). Each figure is the MARGINAL cost of one committed step: a child process runs
one run of N1 no-op steps, another the same with N2 steps, and (instructions(N2) - instructions(N1))
/ (N2 - N1) is what one more step costs, with start-up, imports, migrations and shutdown cancelled
out. Both children register both workflows (and compute both plan hashes), so registering a
longer workflow is not counted as stepping.

Ours: ``Runtime.open`` on a fresh home (SQLite, ``synchronous=FULL``, one worker), one run of N
``@step`` no-op steps (the default effects: each step is its own commit); the last step sets an
event, then the run is awaited once, so no per-step polling is counted (``poll_s`` and ``lease_s``
are long for the same reason: a timer firing during a slow callgrind run would scale with N).

The baseline is the bare loop: Python's ``sqlite3`` in WAL mode with ``synchronous=FULL``, one
transaction per step of one UPDATE of the run row (step, state as JSON, seq, time) and one INSERT
of an event row, measured the same way (two N, the difference). With ``--peer``, OpenRath 2.0.0
(its venv: ``.openrath-venv`` or ``bench/.venvs/openrath``) is measured the same way again (one
run of N generated steps, ``work_once`` until done) and printed as a second line without a
target; its import alone is 8 G instructions, about three minutes a child under callgrind, so it
is not measured by default. A short run (3 steps) goes before the measured one in our child, so
first-use costs (lazy imports, caches) are not counted as stepping.

Target (issue 31): ours at most 5x the bare loop's instructions per step; exit 1 when missed.

To see where a step's instructions go, keep the output files (``--keep DIR``) and run
``callgrind_annotate --inclusive=yes DIR/ours-N2.out``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET_RATIO = 5.0
ROOT = Path(__file__).resolve().parents[1]
PEER_PYTHONS = (ROOT / ".openrath-venv" / "bin" / "python", ROOT / "bench" / ".venvs" / "openrath" / "bin" / "python")

OURS = """
import sys, tempfile
import anyio
from runtime import Runtime, StepContext, Workflow, step

steps, sizes = int(sys.argv[1]), [int(n) for n in sys.argv[2].split(",")]
finished: dict = {}  # workflow length -> event set by its last step


def make(n):
    class Steps(Workflow):
        '''No-op steps in a line.'''

    Steps.name = f"steps_{n}"
    for i in range(n):
        async def noop(self, state, ctx, _i=i, _last=i + 1 == n):
            if _last:
                finished[n].set()
            return {**state, "i": _i}

        noop.__name__ = f"s{i}"
        setattr(Steps, f"s{i}", step(entry=i == 0, successors=[f"s{i + 1}"] if i + 1 < n else [])(noop))
    return Steps


async def main():
    with tempfile.TemporaryDirectory() as home:
        async with Runtime.open(home, workers=1, synchronous="FULL", poll_s=3600, lease_s=3600) as rt:
            for n in (3, *sizes):
                rt.workflows.register(make(n))
                rt.runs.engine.workflows.get(f"steps_{n}").plan_hash
            for n in (3, steps):  # a short run first: first-use costs (lazy imports, caches) land in it
                finished[n] = anyio.Event()
                run = await rt.runs.start(f"steps_{n}")
                await finished[n].wait()
                done = await rt.runs.wait(run.id, 3600)
                assert done.status == "succeeded", done.status


anyio.run(main)
"""

BARE = """
import json, sqlite3, sys, tempfile, time
from pathlib import Path

steps = int(sys.argv[1])
with tempfile.TemporaryDirectory() as d:
    conn = sqlite3.connect(Path(d) / "bare.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, step TEXT, state TEXT, seq INTEGER, updated REAL)")
    conn.execute("CREATE TABLE events (run TEXT, seq INTEGER, type TEXT, data TEXT, PRIMARY KEY (run, seq))")
    conn.execute("INSERT INTO runs VALUES ('r1', 's0', '{}', 0, 0)")
    for i in range(steps):
        state = json.dumps({"i": i})
        conn.execute("BEGIN IMMEDIATE")
        (seq,) = conn.execute(
            "UPDATE runs SET step = ?, state = ?, seq = seq + 1, updated = ? WHERE id = ? RETURNING seq",
            (f"s{i + 1}", state, time.time(), "r1"),
        ).fetchone()
        conn.execute("INSERT INTO events VALUES (?, ?, ?, ?)", ("r1", seq, "step.completed", json.dumps({"step": i})))
        conn.execute("COMMIT")
    conn.close()
"""

OPENRATH = """
import sys, tempfile
from pathlib import Path
from uuid import uuid4
from rath.context import RunContext
from rath.definition import step
from rath.flow import Workflow
from rath.runtime import LocalRuntime, SQLiteRunStore

steps, sizes = int(sys.argv[1]), [int(n) for n in sys.argv[2].split(",")]


def make(n):
    class Steps(Workflow):
        def forward(self, session):
            return session

    for i in range(n):
        def noop(self, state, ctx, _i=i):
            return {**state, "i": _i}

        noop.__name__ = f"s{i}"
        setattr(Steps, f"s{i}", step(entry=i == 0, successors=(f"s{i + 1}",) if i + 1 < n else ())(noop))
    return Steps()


flows = {n: make(n) for n in sizes}
with tempfile.TemporaryDirectory() as d:
    rt = LocalRuntime(SQLiteRunStore(Path(d) / "or.db"))
    rt.submit(flows[steps], session_id=uuid4(), context=RunContext.local(revision_id=uuid4()))
    while rt.work_once(worker_id="w1"):
        pass
"""


def instructions(python: Path, code: str, args: list[str], keep: Path | None, label: str) -> int:
    """Instructions a ``python -c code args`` process executes under callgrind, all threads summed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", str(python), "-c", code, *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"{label} failed under callgrind:\n{proc.stderr[-4000:]}")
        text = out.read_text()
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(out, keep / f"{label}.out")
    match = re.search(r"^(?:summary|totals): (\d+)", text, re.MULTILINE)
    if match is None:
        raise SystemExit(f"no instruction total in the callgrind output of {label}")
    return int(match.group(1))


def per_step(python: Path, code: str, sizes: tuple[int, int], name: str, keep: Path | None) -> float:
    """Marginal instructions of one step: the difference of two runs of ``sizes`` steps, per step."""
    both = ",".join(map(str, sizes))
    small, large = (instructions(python, code, [str(n), both], keep, f"{name}-{n}") for n in sizes)
    return (large - small) / (sizes[1] - sizes[0])


def peer_python() -> Path | None:
    return next((p for p in PEER_PYTHONS if p.exists()), None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default="60,260", help="the two run lengths N1,N2 whose difference is measured")
    parser.add_argument("--peer", action="store_true", help="measure OpenRath 2.0.0 too (about 6 more minutes)")
    parser.add_argument("--keep", type=Path, help="copy the callgrind output files into this directory")
    args = parser.parse_args()
    n1, n2 = (int(n) for n in args.steps.split(","))
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    python = Path(sys.executable)
    print(f"instructions per committed no-op step, SQLite synchronous=FULL, callgrind; marginal cost: "
          f"(runs of {n2} steps - runs of {n1} steps) / {n2 - n1}, start-up cancelled out", flush=True)  # fmt: skip
    bare = per_step(python, BARE, (n1, n2), "bare", args.keep)
    ours = per_step(python, OURS, (n1, n2), "ours", args.keep)
    peer = peer_python()
    theirs = None if not args.peer or peer is None else per_step(peer, OPENRATH, (n1, n2), "openrath", args.keep)
    print(f"{'system':<44} {'instructions/step':>18} {'vs bare':>9}")
    print(f"{'bare sqlite3 loop (UPDATE + INSERT a commit)':<44} {bare:>18,.0f} {1:>8.2f}x")
    target = f"(target <= {TARGET_RATIO:g}x)"
    print(f"{'rath-mcp runtime, one run, @step no-ops':<44} {ours:>18,.0f} {ours / bare:>8.2f}x  {target}")
    if theirs is not None:
        print(f"{'OpenRath 2.0.0 LocalRuntime (no target)':<44} {theirs:>18,.0f} {theirs / bare:>8.2f}x")
    missed = ours / bare > TARGET_RATIO
    print("target: " + (f"MISSED ({ours / bare:.2f}x > {TARGET_RATIO:g}x)" if missed else "met"))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
