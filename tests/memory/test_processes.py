"""Two real processes writing to one home at the same time keep every item."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process

from runtime import Runtime

pytestmark = pytest.mark.anyio

# Each writer opens the runtime, says it is ready, waits for the go file, then remembers 20
# items concurrently (so they are group-committed) while the other process does the same.
WRITER = """
import sys, anyio
from pathlib import Path
from runtime import Runtime

home, name = Path(sys.argv[1]), sys.argv[2]

async def main() -> None:
    async with Runtime.open(home) as rt:
        (home / f"ready-{name}").touch()
        with anyio.fail_after(30):
            while not (home / "go").exists():
                await anyio.sleep(0.005)
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(lambda i=i: rt.memory.remember(f"note {i} from {name}", path=f"{name}/{i}", source=name))

anyio.run(main)
"""


async def _fail_if_exited(procs: list[Process]) -> None:
    for proc in procs:
        if proc.returncode not in (None, 0):
            assert proc.stderr is not None
            error = (await proc.stderr.receive(65536)).decode(errors="replace")
            pytest.fail(f"writer process exited with {proc.returncode}:\n{error}")


async def test_two_processes_writing_20_items_each_keep_all_40(home: Path) -> None:
    async with Runtime.open(home):  # create and migrate the store first, as a server would
        pass
    procs = [
        await anyio.open_process([sys.executable, "-c", WRITER, str(home), name], cwd=Path(__file__).parents[2])
        for name in ("alpha", "beta")
    ]
    try:
        with anyio.fail_after(60):
            while not all((home / f"ready-{n}").exists() for n in ("alpha", "beta")):
                await _fail_if_exited(procs)
                await anyio.sleep(0.01)
            (home / "go").touch()
            for proc in procs:
                await proc.wait()
            await _fail_if_exited(procs)
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
            await proc.aclose()
    async with Runtime.open(home) as rt:
        items = await rt.memory.list(limit=1000)
        assert len(items) == 40
        assert {i.content for i in items} == {f"note {i} from {n}" for i in range(20) for n in ("alpha", "beta")}
        assert len(await rt.memory.recall("alpha", k=100)) == 20
        assert {i.source for i in items} == {"alpha", "beta"}
