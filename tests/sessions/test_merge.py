"""Merge (CONTRACT §2): shared prefix once, branch deltas in argument order, usage never double-counted."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import InvalidInputError, NotFoundError, Placement, Runtime, Usage

pytestmark = pytest.mark.anyio


def msg(text: str, kind: str = "user") -> dict[str, Any]:
    return {"kind": kind, "content": text}


def tokens(n: int) -> Usage:
    return Usage(prompt_tokens=n, completion_tokens=2 * n, total_tokens=3 * n)


async def contents(rt: Runtime, session_id: str) -> list[str]:
    return [c.content for c in await rt.sessions.chunks(session_id)]


async def test_merge_of_two_forks_keeps_the_shared_prefix_once_and_sums_only_the_deltas(rt: Runtime) -> None:
    base = await rt.sessions.create([msg("sys", "system"), msg("task")], usage=tokens(100))
    left, right = await rt.sessions.fork(base.id, count=2)
    a = await rt.sessions.append(left.id, [msg("a1", "assistant"), msg("a2")], usage=tokens(5))
    b = await rt.sessions.append(right.id, [msg("b1", "assistant")], usage=tokens(7))
    m = await rt.sessions.merge([a.id, b.id])
    assert await contents(rt, m.id) == ["sys", "task", "a1", "a2", "b1"]
    assert m.usage == tokens(100 + 5 + 7)  # not 2 x 100
    assert m.op == "merge" and m.parents == (a.id, b.id) and m.length == 5
    assert m.metadata["shared_prefix"] == 2 and m.metadata["merge_strategy"] == "append"
    swapped = await rt.sessions.merge([b.id, a.id])
    assert await contents(rt, swapped.id) == ["sys", "task", "b1", "a1", "a2"]
    assert swapped.usage == m.usage


async def test_merge_of_sessions_with_no_common_ancestor_concatenates_and_sums(rt: Runtime) -> None:
    a = await rt.sessions.create([msg("a0"), msg("a1")], usage=tokens(3))
    b = await rt.sessions.create([msg("b0")], usage=tokens(4))
    m = await rt.sessions.merge([a.id, b.id])
    assert await contents(rt, m.id) == ["a0", "a1", "b0"]
    assert m.usage == tokens(7) and m.metadata["shared_prefix"] == 0


async def test_merge_of_equal_text_from_unrelated_sessions_keeps_both(rt: Runtime) -> None:
    """Identity, not text, decides what is shared: two users saying "hi" said it twice."""
    a = await rt.sessions.create([msg("hi")])
    b = await rt.sessions.create([msg("hi")])
    m = await rt.sessions.merge([a.id, b.id])
    assert await contents(rt, m.id) == ["hi", "hi"]


async def test_merge_of_three_branches_keeps_each_shared_piece_once(rt: Runtime) -> None:
    """a and b share P+X; c shares only P. X must appear once and its usage count once."""
    p = await rt.sessions.create([msg("P")], usage=tokens(10))
    x = await rt.sessions.append(p.id, [msg("X")], usage=tokens(20))
    a = await rt.sessions.append(x.id, [msg("A")], usage=tokens(1))
    b = await rt.sessions.append(x.id, [msg("B")], usage=tokens(2))
    c = await rt.sessions.append(p.id, [msg("C")], usage=tokens(4))
    m = await rt.sessions.merge([a.id, b.id, c.id])
    assert await contents(rt, m.id) == ["P", "X", "A", "B", "C"]
    assert m.usage == tokens(10 + 20 + 1 + 2 + 4)
    assert m.parents == (a.id, b.id, c.id)
    m2 = await rt.sessions.merge([c.id, a.id, b.id])
    assert await contents(rt, m2.id) == ["P", "C", "X", "A", "B"]
    assert m2.usage == m.usage


async def test_merge_with_its_own_ancestor_adds_nothing(rt: Runtime) -> None:
    p = await rt.sessions.create([msg("p")], usage=tokens(1))
    a = await rt.sessions.append(p.id, [msg("a")], usage=tokens(2))
    for order in ([a.id, p.id], [p.id, a.id]):
        m = await rt.sessions.merge(order)
        assert await contents(rt, m.id) == ["p", "a"]
        assert m.usage == tokens(3)


async def test_merge_of_merges_never_counts_shared_history_twice(rt: Runtime) -> None:
    """A criss-cross: m1 and m2 both merge a and b; merging them must not add b (or a) again."""
    p = await rt.sessions.create([msg("p")], usage=tokens(1))
    a = await rt.sessions.append(p.id, [msg("a")], usage=tokens(10))
    b = await rt.sessions.append(p.id, [msg("b")], usage=tokens(100))
    m1 = await rt.sessions.merge([a.id, b.id])
    m2 = await rt.sessions.merge([b.id, a.id])
    m3 = await rt.sessions.merge([m1.id, m2.id])
    assert m3.usage == tokens(111)
    assert await contents(rt, m3.id) == ["p", "a", "b"]
    later = await rt.sessions.append(m1.id, [msg("z")], usage=tokens(1000))
    m4 = await rt.sessions.merge([m2.id, later.id])
    assert m4.usage == tokens(1111)
    assert await contents(rt, m4.id) == ["p", "b", "a", "z"]


async def test_detached_copies_share_no_history_so_their_usage_sums(rt: Runtime) -> None:
    """Detach starts a new root: merging it with its source is a merge without common ancestor."""
    s = await rt.sessions.create([msg("s")], usage=tokens(5))
    d = await rt.sessions.detach(s.id)
    m = await rt.sessions.merge([s.id, d.id])
    assert m.usage == tokens(10)
    assert await contents(rt, m.id) == ["s"]  # the very same message, held once


async def test_merge_keeps_the_first_sessions_placement(rt: Runtime) -> None:
    a = await rt.sessions.create([msg("a")], placement=Placement(backend="local", workspace="one"))
    b = await rt.sessions.create([msg("b")], placement=Placement(backend="opensandbox", workspace="two"))
    assert (await rt.sessions.merge([a.id, b.id])).placement == Placement(backend="local", workspace="one")
    assert (await rt.sessions.merge([b.id, a.id])).placement == Placement(backend="opensandbox", workspace="two")


async def test_merge_combines_metadata_later_branches_winning(rt: Runtime) -> None:
    a = await rt.sessions.create([msg("a")], metadata={"who": "a", "only_a": 1})
    b = await rt.sessions.create([msg("b")], metadata={"who": "b"})
    m = await rt.sessions.merge([a.id, b.id])
    assert m.metadata == {"who": "b", "only_a": 1, "merge_strategy": "append", "shared_prefix": 0}


async def test_concat_is_openraths_plain_concatenation(rt: Runtime) -> None:
    base = await rt.sessions.create([msg("shared")], usage=tokens(10))
    a = await rt.sessions.append(base.id, [msg("a")], usage=tokens(1))
    b = await rt.sessions.append(base.id, [msg("b")], usage=tokens(2))
    m = await rt.sessions.merge([a.id, b.id], strategy="concat")
    assert await contents(rt, m.id) == ["shared", "a", "shared", "b"]
    assert m.usage == tokens(23)
    assert m.metadata["merge_strategy"] == "concat"
    # What concat counted twice is its own doing: a later merge with a branch keeps it, once.
    again = await rt.sessions.merge([m.id, b.id])
    assert again.usage == tokens(23)


async def test_merge_of_a_long_session_shares_the_first_branch(rt: Runtime) -> None:
    base = await rt.sessions.create([msg(f"m{i}") for i in range(2000)])
    left, right = await rt.sessions.fork(base.id, count=2)
    a = await rt.sessions.append(left.id, [msg("a")])
    b = await rt.sessions.append(right.id, [msg("b")])
    m = await rt.sessions.merge([a.id, b.id])
    assert m.length == 2002
    tail = await rt.sessions.chunks(m.id, offset=1998)
    assert [c.content for c in tail] == ["m1998", "m1999", "a", "b"]


@pytest.mark.parametrize(
    ("ids", "strategy", "message"),
    [
        (1, "append", "at least two session ids"),
        (2, "zip", "unknown merge strategy 'zip'"),
    ],
)
async def test_bad_merge_requests_are_refused_and_write_nothing(
    rt: Runtime, ids: int, strategy: Any, message: str
) -> None:
    sessions = [await rt.sessions.create([msg(str(i))]) for i in range(ids)]
    with pytest.raises(InvalidInputError, match=message):
        await rt.sessions.merge([s.id for s in sessions], strategy=strategy)
    page, _ = await rt.sessions.page()
    assert len(page) == ids


async def test_merging_a_session_with_itself_is_refused(rt: Runtime) -> None:
    a = await rt.sessions.create([msg("a")])
    with pytest.raises(InvalidInputError, match="same session id twice"):
        await rt.sessions.merge([a.id, a.id])
    with pytest.raises(NotFoundError):
        await rt.sessions.merge([a.id, "ses_ffffffffffffffffffffffff"])
    page, _ = await rt.sessions.page()
    assert [s.id for s in page] == [a.id]


async def test_a_result_derived_from_two_branches_carries_their_history_once(rt: Runtime) -> None:
    """derive (what runs and compress use) defaults its usage to the parents' joint history, and a
    later merge with one of those parents adds nothing twice."""
    p = await rt.sessions.create([msg("p")], usage=tokens(10))
    a = await rt.sessions.append(p.id, [msg("a")], usage=tokens(1))
    b = await rt.sessions.append(p.id, [msg("b")], usage=tokens(2))
    summary = await rt.sessions.derive([a.id, b.id], [msg("summary of a and b", "system")], op="compress")
    assert summary.usage == tokens(13) and summary.parents == (a.id, b.id)
    spent = await rt.sessions.derive([a.id, b.id], [msg("answer", "assistant")], op="run", usage=tokens(20))
    assert spent.usage == tokens(20)
    m = await rt.sessions.merge([spent.id, b.id])
    assert m.usage == tokens(20)  # b's history is already inside spent's
    m2 = await rt.sessions.merge([summary.id, spent.id])
    assert m2.usage == tokens(20)  # spent added 7 over the same history summary holds
