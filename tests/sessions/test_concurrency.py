"""Many ops at once: group-committed writes must keep every snapshot's history its own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from runtime import Runtime, SessionInfo, Usage

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


async def test_concurrent_appends_to_one_tip_each_get_their_own_history(rt: Runtime) -> None:
    base = await rt.sessions.create([{"kind": "user", "content": "base"}])
    results: dict[int, SessionInfo] = {}

    async def append(i: int) -> None:
        results[i] = await rt.sessions.append(
            base.id, [{"kind": "user", "content": f"c{i}"}], usage=Usage(total_tokens=i)
        )

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i in range(30):
                tg.start_soon(append, i)
    assert len({r.id for r in results.values()}) == 30
    for i, info in results.items():
        assert [c.content for c in await rt.sessions.chunks(info.id)] == ["base", f"c{i}"]
        assert info.usage == Usage(total_tokens=i)
    assert [c.content for c in await rt.sessions.chunks(base.id)] == ["base"]


async def test_concurrent_forks_appends_and_merges_stay_consistent(rt: Runtime) -> None:
    base = await rt.sessions.create(
        [{"kind": "user", "content": f"b{i}"} for i in range(50)], usage=Usage(total_tokens=50)
    )
    forks = await rt.sessions.fork(base.id, count=10)
    grown: dict[int, str] = {}

    async def grow(i: int, session_id: str) -> None:
        for step in range(5):
            session_id = (
                await rt.sessions.append(
                    session_id, [{"kind": "assistant", "content": f"f{i}.{step}"}], usage=Usage(total_tokens=1)
                )
            ).id
        grown[i] = session_id

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i, f in enumerate(forks):
                tg.start_soon(grow, i, f.id)
    merged = await rt.sessions.merge([grown[i] for i in range(10)])
    expected = [f"b{i}" for i in range(50)] + [f"f{i}.{s}" for i in range(10) for s in range(5)]
    assert [c.content for c in await rt.sessions.chunks(merged.id)] == expected
    assert merged.usage == Usage(total_tokens=50 + 10 * 5)


WRITER = """
import json, sys, anyio
from runtime import Runtime

async def main(home, base, tag):
    async with Runtime.open(home, workers=0) as rt:
        out = []
        for i in range(20):
            info = await rt.sessions.append(base, [{"kind": "user", "content": f"{tag}{i}"}])
            out.append([info.id, f"{tag}{i}"])
        print(json.dumps(out))

anyio.run(main, *sys.argv[1:])
"""


async def test_two_processes_appending_to_one_tip_share_the_file_safely(home: Path) -> None:
    async with Runtime.open(home, workers=0) as rt:
        base = await rt.sessions.create([{"kind": "user", "content": "base"}])
    with anyio.fail_after(60):
        outputs = await _run_all([[sys.executable, "-c", WRITER, str(home), base.id, tag] for tag in ("p", "q")])
    made = [pair for text in outputs for pair in json.loads(text)]
    assert len(made) == 40
    async with Runtime.open(home, workers=0) as rt:
        for session_id, content in made:
            assert [c.content for c in await rt.sessions.chunks(session_id)] == ["base", content]
        assert [c.content for c in await rt.sessions.chunks(base.id)] == ["base"]


async def _run_all(commands: list[list[str]]) -> list[str]:
    outputs: dict[int, str] = {}

    async def run(i: int, command: list[str]) -> None:
        result = await anyio.run_process(command, cwd=ROOT, check=True)
        outputs[i] = result.stdout.decode()

    async with anyio.create_task_group() as tg:
        for i, command in enumerate(commands):
            tg.start_soon(run, i, command)
    return [outputs[i] for i in range(len(commands))]
