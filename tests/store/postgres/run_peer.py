"""The other process of the run-watch test: one change to the runs of a PostgreSQL store, then exit.

python -m tests.store.postgres.run_peer URL create          # prints the new run's id
python -m tests.store.postgres.run_peer URL decide INT_ID   # answers a pending interrupt
python -m tests.store.postgres.run_peer URL cancel RUN_ID
"""

from __future__ import annotations

import sys

import anyio

from runtime.durable.store import NewRun
from runtime.flow.workflow import Decision
from runtime.store import parse_store_url
from runtime.store.postgres import backend as postgres


async def main(url: str, action: str, *args: str) -> None:
    backend = await postgres.open(parse_store_url(url), max_size=1)
    try:
        store = backend.runs("local", "default")
        if action == "create":
            new = NewRun(workflow="wf", plan_hash="h", step="first", input_json="{}")
            print(await store.create(new, [("run.created", {"workflow": "wf"})]), flush=True)
        elif action == "decide":
            await store.decide(args[0], Decision(action="approve", actor="peer"), lambda _i: None)
        elif action == "cancel":
            await store.cancel(args[0], "from the peer")
        else:
            raise SystemExit(f"unknown action {action!r}")
    finally:
        await backend.close()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
