"""How many write transactions one run takes on SQLite, from ``run_start`` to its committed checkpoint.

Each write is a transaction of its own when the run is alone (an fsync it waits for, with
``synchronous=FULL``), so the count is what a run costs. The run is driven the way a worker drives it
(claim, then a ``Runner`` in the run's scope) without the worker's loops, whose polls and renewals
depend on time; every ``SQLiteDatabase.write`` is counted, with the method above the store that asked for it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from runtime import Runtime
from runtime.durable.runner import Runner
from runtime.durable.step_call import Lease
from runtime.durable.worker import Worker
from runtime.store.sqlite.backend import SQLiteBackend

pytestmark = pytest.mark.anyio

# run_start, the claim, the reply session (made, then the reply appended: the echo workflow's own
# writes), the effect's outcome in the ledger, and the step's commit with the run's end and checkpoint.
# An idempotent effect records no ``dispatched`` entry: one caught in flight is simply run again.
ECHO_WRITES = [
    "RunService.submit",
    "Worker.claim",
    "SessionService.create",
    "SessionService.append",
    "LiveContext._record",
    "CommitLine._with_held",
]


def _plumbing(code: Any) -> bool:
    """The store's own frames, and the retry and shielding wrappers a step's writes go through."""
    name, file = code.co_qualname, code.co_filename
    return "/runtime/store/" in file or file.endswith("outage.py") or "<locals>" in name or name.endswith("._write")


def _maker() -> str:
    """The qualified name of the first caller of ``write`` above the store (the layer that asked for it)."""
    frame = sys._getframe(2)
    while frame.f_back is not None and _plumbing(frame.f_code):
        frame = frame.f_back
    return frame.f_code.co_qualname


async def test_an_echo_run_takes_six_write_transactions(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Runtime.open(home, workers=0) as rt:
        assert isinstance(rt.store, SQLiteBackend)
        db, writes = rt.store.db, []
        write = db.write

        async def counted(fn: Any, *, small: bool = False) -> Any:
            writes.append(_maker())
            return await write(fn, small=small)

        monkeypatch.setattr(db, "write", counted)
        run = await rt.runs.start("echo", input={"message": "hello"})
        (claim,) = await Worker(rt.engine, slots=1).claim(1)
        runner = Runner(rt.engine, rt.workflows.get("echo"), claim, Lease(claim.id, claim.token))
        with rt.engine.scope(claim.tenant, claim.project):
            await runner.drive()
        monkeypatch.undo()
        done = await rt.runs.get(run.id)
        assert done.status == "succeeded" and done.result == {"echoed": "hello"}
        assert done.output_session_id is not None
        output = await rt.sessions.get(done.output_session_id)
        assert [(c.kind, c.content) for c in output.chunks] == [("user", "hello"), ("assistant", "hello")]
        assert [c["next_step"] for c in await rt.runs.checkpoints(run.id)] == [None]
    assert writes == ECHO_WRITES, f"{len(writes)} writes: {writes}"
