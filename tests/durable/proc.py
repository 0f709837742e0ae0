"""A durable-runtime process for the multi-process tests: ``python -m tests.durable.proc MODE HOME ...``.

Modes:
  worker HOME LEASE_S [STORE [SLOTS]]  serve runs (4 slots; STORE "-": the home's) until killed; prints "ready"
  claim HOME DIR ROUNDS        for each round k: wait for DIR/go{k}, try to claim one run, print the claim as JSON
  start-approval HOME          start an approval run on a new session, wait until it parks, print it as JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from runtime import Runtime
from runtime.durable import Worker

FLOWS = "tests.durable.flows"


async def worker(home: str, lease_s: float, store: str | None = None, slots: int = 4) -> None:
    async with Runtime.open(home, store=store, lease_s=lease_s, workers=slots) as rt:
        rt.workflows.load(FLOWS)
        print("ready", flush=True)
        await anyio.sleep_forever()


async def claim(home: str, go_dir: str, rounds: int) -> None:
    async with Runtime.open(home, workers=0) as rt:
        rt.workflows.load(FLOWS)
        claimer = Worker(rt.engine, slots=1, lease_s=60)
        print("ready", flush=True)
        for k in range(rounds):
            go = Path(go_dir) / f"go{k}"
            while not go.exists():  # noqa: ASYNC110 - the test process creates it
                await anyio.sleep(0.002)
            claims = await claimer.claim(1)
            print(json.dumps([[c.id, c.token] for c in claims]), flush=True)


async def start_approval(home: str) -> None:
    async with Runtime.open(home, workers=2) as rt:
        session = await rt.sessions.create([{"kind": "user", "content": "write the release note"}])
        run = await rt.runs.start("approval", session_id=session.id, input={"draft": "v2 is out"})
        run = await rt.runs.wait(run.id, 20)
        print(json.dumps({"run_id": run.id, "status": run.status, "session_id": session.id}), flush=True)


def main() -> None:
    mode, home, *rest = sys.argv[1:]
    if mode == "worker":
        store = rest[1] if len(rest) > 1 and rest[1] != "-" else None
        anyio.run(worker, home, float(rest[0]), store, int(rest[2]) if len(rest) > 2 else 4)
    elif mode == "claim":
        anyio.run(claim, home, rest[0], int(rest[1]))
    elif mode == "start-approval":
        anyio.run(start_approval, home)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
