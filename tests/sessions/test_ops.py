"""The single-session operations, through ``Runtime.sessions``: create, append, fork, detach, derive, read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from runtime import Chunk, InvalidInputError, NotFoundError, Placement, Runtime, Usage
from runtime.sessions import ToolCall, ToolCallFunction

pytestmark = pytest.mark.anyio


def user(text: str) -> dict[str, Any]:
    return {"kind": "user", "content": text}


async def contents(rt: Runtime, session_id: str) -> list[str]:
    return [c.content for c in await rt.sessions.chunks(session_id)]


async def session_count(rt: Runtime) -> int:
    page, _ = await rt.sessions.page(limit=500)
    return len(page)


async def test_create_holds_its_chunks_in_order_with_defaults(rt: Runtime) -> None:
    s = await rt.sessions.create([{"kind": "system", "content": "be brief"}, user("hi")])
    got = await rt.sessions.get(s.id)
    assert got.id.startswith("ses_") and got.op == "create" and got.parents == ()
    assert [c.kind for c in got.chunks] == ["system", "user"]
    assert [c.content for c in got.chunks] == ["be brief", "hi"]
    assert got.length == 2 and got.placement == Placement() and got.usage == Usage()
    assert (got.tenant, got.project) == ("local", "default")
    assert got == s


async def test_empty_session_then_append(rt: Runtime) -> None:
    s = await rt.sessions.create()
    assert s.length == 0 and await rt.sessions.chunks(s.id) == []
    a = await rt.sessions.append(s.id, [user("first")])
    assert await contents(rt, a.id) == ["first"]


async def test_tool_calls_and_tool_results_round_trip(rt: Runtime) -> None:
    call = ToolCall(id="call_1", function=ToolCallFunction(name="ls", arguments='{"path": "."}'))
    chunks = [
        Chunk(kind="assistant", content="", tool_calls=(call,)),
        Chunk(kind="tool_result", content="a.txt", tool_call_id="call_1", name="ls"),
    ]
    s = await rt.sessions.create(chunks)
    got = await rt.sessions.get(s.id)
    assert got.chunks == tuple(chunks)
    assert got.messages()[0]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}
    ]


async def test_append_makes_a_new_snapshot_and_leaves_the_original_unchanged(rt: Runtime) -> None:
    s = await rt.sessions.create([user("a")], usage=Usage(prompt_tokens=3, total_tokens=3), metadata={"k": 1})
    reply = [{"kind": "assistant", "content": "b"}]
    a = await rt.sessions.append(s.id, reply, usage=Usage(completion_tokens=2, total_tokens=2), metadata={"j": 2})
    assert a.id != s.id and a.parents == (s.id,) and a.op == "append" and a.length == 2
    assert a.usage == Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5)
    assert a.metadata == {"k": 1, "j": 2}
    assert await contents(rt, s.id) == ["a"]
    assert (await rt.sessions.info(s.id)).usage.total_tokens == 3
    assert await contents(rt, a.id) == ["a", "b"]


async def test_fork_shares_chunks_records_its_parent_and_keeps_usage(rt: Runtime) -> None:
    s = await rt.sessions.create([user("a"), user("b")], usage=Usage(total_tokens=7), metadata={"m": True})
    forks = await rt.sessions.fork(s.id, count=3)
    assert len({f.id for f in forks}) == 3
    for f in forks:
        assert f.op == "fork" and f.parents == (s.id,) and f.length == 2
        assert f.usage == Usage(total_tokens=7) and f.metadata == {"m": True}
        assert await contents(rt, f.id) == ["a", "b"]


async def test_fork_can_place_each_child(rt: Runtime) -> None:
    s = await rt.sessions.create([user("a")], placement=Placement(backend="local", workspace="w0"))
    places = [Placement(backend="local", workspace="w1"), Placement(backend="opensandbox", workspace="w2")]
    forks = await rt.sessions.fork(s.id, count=2, placements=places)
    assert [f.placement for f in forks] == places
    with pytest.raises(InvalidInputError, match="one placement per fork"):
        await rt.sessions.fork(s.id, count=2, placements=places[:1])


@pytest.mark.parametrize("count", [0, -1, 65])
async def test_fork_count_out_of_range_is_refused(rt: Runtime, count: int) -> None:
    s = await rt.sessions.create([user("a")])
    with pytest.raises(InvalidInputError, match="count must be between 1 and 64"):
        await rt.sessions.fork(s.id, count=count)
    assert await session_count(rt) == 1


async def test_detach_is_a_new_root_with_the_same_chunks_placement_and_usage(rt: Runtime) -> None:
    s = await rt.sessions.create([user("a")], placement=Placement(workspace="ws"), usage=Usage(total_tokens=4))
    a = await rt.sessions.append(s.id, [user("b")])
    d = await rt.sessions.detach(a.id)
    assert d.op == "detach" and d.parents == ()
    assert d.placement == Placement(workspace="ws") and d.usage == Usage(total_tokens=4)
    assert await contents(rt, d.id) == ["a", "b"]
    assert await rt.sessions.ancestors(d.id) == []
    assert d.id not in await rt.sessions.descendants(a.id)


async def test_derive_points_at_its_parents_and_carries_their_usage(rt: Runtime) -> None:
    s = await rt.sessions.create([user("long story")], usage=Usage(total_tokens=10))
    c = await rt.sessions.derive([s.id], [{"kind": "system", "content": "summary"}], op="compress")
    assert c.op == "compress" and c.parents == (s.id,) and c.usage == Usage(total_tokens=10)
    assert await contents(rt, c.id) == ["summary"]
    more = await rt.sessions.derive([s.id], [user("x")], op="run", usage=Usage(total_tokens=25))
    assert more.usage == Usage(total_tokens=25)


async def test_chunk_order_holds_when_tip_and_new_segment_appends_interleave(rt: Runtime) -> None:
    """Fork, then append to the parent (extends its segment in place) and to the fork (a new
    segment), over and over: every snapshot still reads exactly its own history."""
    expected: dict[str, list[str]] = {}
    s = await rt.sessions.create([user("root")])
    expected[s.id] = ["root"]
    parent = s.id
    for round_ in range(6):
        (fork,) = await rt.sessions.fork(parent)
        expected[fork.id] = list(expected[parent])
        p2 = await rt.sessions.append(parent, [user(f"p{round_}")])
        expected[p2.id] = [*expected[parent], f"p{round_}"]
        f2 = await rt.sessions.append(fork.id, [user(f"f{round_}a"), user(f"f{round_}b")])
        expected[f2.id] = [*expected[fork.id], f"f{round_}a", f"f{round_}b"]
        p3 = await rt.sessions.append(p2.id, [user(f"q{round_}")])
        expected[p3.id] = [*expected[p2.id], f"q{round_}"]
        old = await rt.sessions.append(s.id, [user(f"old{round_}")])  # far from any tip
        expected[old.id] = ["root", f"old{round_}"]
        parent = f2.id if round_ % 2 else p3.id
    for session_id, want in expected.items():
        assert await contents(rt, session_id) == want, session_id
        assert (await rt.sessions.info(session_id)).length == len(want)


async def test_chunk_pages_cross_segment_boundaries(rt: Runtime) -> None:
    s = await rt.sessions.create([user(f"a{i}") for i in range(5)])
    (f,) = await rt.sessions.fork(s.id)
    await rt.sessions.append(s.id, [user("moves the tip")])
    b = await rt.sessions.append(f.id, [user(f"b{i}") for i in range(5)])  # a new segment after a4
    c = await rt.sessions.append(b.id, [user(f"c{i}") for i in range(5)])  # extends that segment
    (g,) = await rt.sessions.fork(c.id)
    await rt.sessions.append(c.id, [user("tip again")])
    d = await rt.sessions.append(g.id, [user(f"d{i}") for i in range(5)])  # a third segment
    whole = await contents(rt, d.id)
    assert whole == [f"{x}{i}" for x in "abcd" for i in range(5)]
    for offset in range(0, 22):
        for limit in (0, 1, 3, 7, 20):
            page = [ch.content for ch in await rt.sessions.chunks(d.id, offset=offset, limit=limit)]
            assert page == whole[offset : offset + limit], (offset, limit)
    assert [ch.content for ch in await rt.sessions.chunks(d.id, offset=18)] == whole[18:]


async def test_negative_offset_or_limit_is_refused(rt: Runtime) -> None:
    s = await rt.sessions.create([user("a")])
    with pytest.raises(InvalidInputError, match="zero or more"):
        await rt.sessions.chunks(s.id, offset=-1)
    with pytest.raises(InvalidInputError, match="zero or more"):
        await rt.sessions.chunks(s.id, limit=-5)


async def test_page_lists_newest_first_and_its_cursor_walks_every_session(rt: Runtime) -> None:
    ids = [(await rt.sessions.create([user(str(i))])).id for i in range(7)]
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = await rt.sessions.page(cursor, limit=3)
        seen.extend(s.id for s in page)
        if cursor is None:
            break
    assert seen == sorted(ids, reverse=True)
    with pytest.raises(InvalidInputError, match="limit"):
        await rt.sessions.page(limit=0)


async def test_unknown_ids_are_not_found_with_a_hint_and_write_nothing(rt: Runtime) -> None:
    s = await rt.sessions.create([user("a")])
    ghost = "ses_000000000000000000000000"
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: rt.sessions.get(ghost),
        lambda: rt.sessions.info(ghost),
        lambda: rt.sessions.chunks(ghost),
        lambda: rt.sessions.append(ghost, [user("x")]),
        lambda: rt.sessions.fork(ghost),
        lambda: rt.sessions.detach(ghost),
        lambda: rt.sessions.merge([s.id, ghost]),
        lambda: rt.sessions.derive([ghost], [user("x")], op="run"),
        lambda: rt.sessions.lineage(ghost),
        lambda: rt.sessions.export_jsonl(ghost),
    ]
    for call in calls:
        with pytest.raises(NotFoundError, match=r"no session 'ses_0+' in local/default; list sessions"):
            await call()
    assert await session_count(rt) == 1


@pytest.mark.parametrize(
    ("chunk", "message"),
    [
        ({"kind": "robot", "content": "x"}, "chunk 1 is not valid"),
        ({"kind": "user", "content": 5}, "chunk 1 is not valid"),
        ({"kind": "user", "content": "x", "colour": "red"}, "chunk 1 is not valid"),
        ("just text", "chunk 1 is not valid"),
    ],
)
async def test_invalid_chunks_are_refused_and_nothing_is_written(rt: Runtime, chunk: Any, message: str) -> None:
    s = await rt.sessions.create([user("a")])
    with pytest.raises(InvalidInputError, match=message) as info:
        await rt.sessions.append(s.id, [user("fine"), chunk])
    assert "system|user|assistant|tool_result" in str(info.value)
    with pytest.raises(InvalidInputError):
        await rt.sessions.create([chunk])
    assert await session_count(rt) == 1


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"when": {1, 2}}, "plain JSON"),
        ({"x": float("nan")}, "no NaN"),
        ({1: "int key"}, "keys must be strings"),
        (["not", "a", "dict"], "JSON object"),
    ],
)
async def test_metadata_must_be_plain_json(rt: Runtime, metadata: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        await rt.sessions.create([user("a")], metadata=metadata)
    assert await session_count(rt) == 0


async def test_metadata_reads_back_as_it_was_returned(rt: Runtime) -> None:
    s = await rt.sessions.create([user("a")], metadata={"tags": ("x", "y"), "n": {"deep": [1, None]}})
    assert s.metadata == {"tags": ["x", "y"], "n": {"deep": [1, None]}}
    assert (await rt.sessions.info(s.id)).metadata == s.metadata


async def test_usage_and_placement_may_be_plain_dicts(rt: Runtime) -> None:
    s = await rt.sessions.create([user("a")], usage={"total_tokens": 3}, placement={"workspace": "w"})
    assert s.usage == Usage(total_tokens=3) and s.placement == Placement(workspace="w")
    a = await rt.sessions.append(s.id, [user("b")], usage={"prompt_tokens": 1, "total_tokens": 1})
    assert a.usage == Usage(prompt_tokens=1, total_tokens=4)
    (f,) = await rt.sessions.fork(a.id, placements=[{"backend": "opensandbox"}])
    assert f.placement == Placement(backend="opensandbox")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"usage": {"total_tokens": -1}}, "usage is not valid"),
        ({"usage": {"tokens": 5}}, "usage is not valid"),
        ({"placement": {"backend": 7}}, "placement is not valid"),
    ],
)
async def test_bad_usage_or_placement_is_refused_and_writes_nothing(
    rt: Runtime, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        await rt.sessions.create([user("a")], **kwargs)
    assert await session_count(rt) == 0
