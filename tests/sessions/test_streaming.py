"""Reads that scale: a whole session streams a page at a time, and a page of a long session of short
chunks is as cheap as a page of a short one (read in place, no reader thread)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rath_mcp.resources import streamed_transcript, transcript
from runtime import InvalidInputError, NotFoundError, Runtime
from runtime.sessions import jsonl
from runtime.store.sqlite.backend import sqlite_database

pytestmark = pytest.mark.anyio


def user(text: str) -> dict[str, Any]:
    return {"kind": "user", "content": text}


async def test_a_session_streams_in_pages_that_join_to_the_whole(rt: Runtime) -> None:
    base = await rt.sessions.create([user(str(i)) for i in range(23)])
    grown = await rt.sessions.append((await rt.sessions.fork(base.id))[0].id, [user("x"), user("y")])
    pages = [page async for page in rt.sessions.pages(grown.id, size=7)]
    assert [len(p) for p in pages] == [7, 7, 7, 4]
    assert [c for p in pages for c in p] == list((await rt.sessions.get(grown.id)).chunks)
    assert [p async for p in rt.sessions.pages((await rt.sessions.create()).id)] == []


async def test_streaming_a_missing_session_or_in_empty_pages_is_refused(rt: Runtime) -> None:
    with pytest.raises(NotFoundError):
        [p async for p in rt.sessions.pages("ses_nope")]
    s = await rt.sessions.create([user("a")])
    with pytest.raises(InvalidInputError, match="at least one chunk"):
        [p async for p in rt.sessions.pages(s.id, size=0)]


async def test_export_and_transcript_stream_the_same_text_a_whole_read_gives(rt: Runtime) -> None:
    base = await rt.sessions.create([user(f"line {i}") for i in range(1203)])
    child = await rt.sessions.append(base.id, [{"kind": "assistant", "content": "done"}])
    info, stored = await rt.sessions.store.snapshot(child.id)
    graph = await rt.sessions.lineage(child.id, 1000, down=False)
    ancestors = [(n, ()) for n in graph.nodes if n.id != child.id]  # the base, a root: no parents
    assert await rt.sessions.export_jsonl(child.id) == jsonl.dump(info, stored, ancestors)
    assert await streamed_transcript(rt, child.id) == transcript(await rt.sessions.get(child.id))


async def test_a_page_of_a_long_session_of_short_chunks_is_read_in_place(rt: Runtime) -> None:
    long = await rt.sessions.create([user(f"{i} " + "x" * 96) for i in range(3000)])  # ~300k characters
    threads: list[str] = []
    db = sqlite_database(rt.store)
    real_read = db.read
    mine = asyncio.current_task()  # the runtime's own tasks (indexer, ticker, worker) read the store too

    async def read(fn: Any) -> Any:
        if asyncio.current_task() is mine:
            threads.append("read")
        return await real_read(fn)

    db.read = read  # type: ignore[method-assign]
    _, page = await rt.sessions.window(long.id, 1500, 50)
    assert [c.content.split()[0] for c in page] == [str(i) for i in range(1500, 1550)]
    assert threads == []  # 50 chunks of ~100 characters: small, whatever the session's length
    wide = await rt.sessions.append(long.id, [user("w" * 10_000)])
    _, page = await rt.sessions.window(wide.id, 0, 50)  # 50 x its widest chunk is over 256k: a reader thread
    assert len(page) == 50 and threads == ["read"]
