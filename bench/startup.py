"""Cold start: from spawning ``rath-mcp serve`` (stdio) to its answer to the first ``tools/list``.

One command:  .venv/bin/python -m bench.startup [--runs 15]

A desktop host starts the server at every launch and waits for its tool list before the user can
do anything, so this is the latency a person feels. The baseline is a bare ``MCPServer`` with one
tool, started the same way in the same run: what Python, the MCP SDK and the pipe cost before any
of our code. Both are spawned in turns (bare, rath, bare, rath, …) after one untimed launch of
each (which also creates and migrates the rath home, as a host's first launch would), and each
is timed from ``spawn`` to the ``tools/list`` reply with raw JSON-RPC over its pipes. Prints the
medians of wall time and of the CPU time the server process had used by its reply (all threads,
from ``/proc/PID/stat``), each with its ratio to the bare server's. The target, rath within 1.3x
of the bare server, is judged on CPU time: on an idle machine wall time is that CPU time plus a
few milliseconds of I/O, but on a shared 2-core machine one launch's wall time swings 3x with
whatever else runs, while its CPU time does not. Exits 1 when the target is missed.

To see where the time goes: ``python -X importtime -m rath_mcp serve --home DIR < /dev/null``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TARGET_RATIO = 1.3

BARE_SERVER = """
from mcp.server import MCPServer

server = MCPServer("bare", version="0")

@server.tool()
def noop(session_id: str) -> dict[str, str]:
    \"\"\"Return the argument unchanged.\"\"\"
    return {"session_id": session_id}

server.run()
"""

HANDSHAKE = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench.startup", "version": "0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass
class Launch:
    wall_s: float
    cpu_s: float
    tools: int


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far, all its threads included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S  # utime, stime (fields 14 and 15)


def time_to_tool_list(argv: list[str], env: dict[str, str]) -> Launch:
    """Wall and CPU seconds from spawning ``argv`` to its ``tools/list`` reply, and its tool count."""
    request = "".join(json.dumps(message) + "\n" for message in HANDSHAKE).encode()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(request)  # the server reads them in order once it is up
        proc.stdin.flush()
        for line in proc.stdout:
            reply = json.loads(line)
            if reply.get("id") == 2:
                elapsed, cpu = time.perf_counter() - start, cpu_seconds(proc.pid)
                if "result" not in reply:
                    raise SystemExit(f"{argv[-1]}: tools/list failed: {reply}")
                return Launch(elapsed, cpu, len(reply["result"]["tools"]))
        raise SystemExit(f"{' '.join(argv)} exited before answering tools/list")
    finally:
        proc.stdin.close()
        proc.terminate()
        proc.wait()


def measure(runs: int, home: Path, bare_script: Path, pycache: Path) -> tuple[list[Launch], list[Launch]]:
    env = dict(os.environ)
    env.pop("RATH_STORE", None)
    # Both servers start from compiled bytecode, as an installed program does (pip compiles a
    # package's modules when it installs it; an editable or source install writes them at its first
    # run). Without this, under PYTHONDONTWRITEBYTECODE the SDK would load its pip-compiled bytecode
    # while our modules were compiled from source at every launch, ~80 ms that no user pays.
    # A private cache (PYTHONPYCACHEPREFIX) keeps the source tree clean; the untimed launches fill it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    bare = [sys.executable, str(bare_script)]
    rath = [sys.executable, "-m", "rath_mcp", "serve", "--transport", "stdio", "--home", str(home)]
    time_to_tool_list(bare, env)  # untimed: warms the file cache, creates the rath home
    time_to_tool_list(rath, env)
    bare_runs: list[Launch] = []
    rath_runs: list[Launch] = []
    for _ in range(runs):
        bare_runs.append(time_to_tool_list(bare, env))
        rath_runs.append(time_to_tool_list(rath, env))
    return bare_runs, rath_runs


def median_ms(launches: list[Launch], what: str) -> float:
    return statistics.median(getattr(launch, what) for launch in launches) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed launches of each server (default 15)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rath-bench-startup-") as tmp:
        script = Path(tmp) / "bare_server.py"
        script.write_text(BARE_SERVER)
        bare, rath = measure(args.runs, Path(tmp) / "home", script, Path(tmp) / "pycache")
    wall_ratio = median_ms(rath, "wall_s") / median_ms(bare, "wall_s")
    cpu_ratio = median_ms(rath, "cpu_s") / median_ms(bare, "cpu_s")
    verdict = "ok" if cpu_ratio <= TARGET_RATIO else f"> {TARGET_RATIO}x"
    print(f"spawn to first tools/list over stdio, {args.runs} launches each, taking turns (medians)\n")
    print("| server | wall ms | x bare | CPU ms | x bare | target (CPU) |")
    print("|---|---:|---:|---:|---:|---|")
    for name, runs, wall_x, cpu_x, mark in [
        ("bare MCPServer (1 tool)", bare, "1.00", "1.00", "-"),
        (f"rath-mcp serve ({rath[0].tools} tools)", rath, f"{wall_ratio:.2f}", f"{cpu_ratio:.2f}", verdict),
    ]:
        wall, cpu = median_ms(runs, "wall_s"), median_ms(runs, "cpu_s")
        print(f"| {name} | {wall:.0f} | {wall_x} | {cpu:.0f} | {cpu_x} | {mark} |")
    return 0 if cpu_ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
