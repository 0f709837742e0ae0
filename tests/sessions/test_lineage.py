"""Lineage queries: ancestors, descendants, the DAG as nodes/edges and as Mermaid text."""

from __future__ import annotations

import pytest

from runtime import InvalidInputError, Runtime, SessionInfo

pytestmark = pytest.mark.anyio


async def test_lineage_of_a_fork_merge_diamond(rt: Runtime) -> None:
    root = await rt.sessions.create([{"kind": "user", "content": "go"}])
    left, right = await rt.sessions.fork(root.id, count=2)
    a = await rt.sessions.append(left.id, [{"kind": "assistant", "content": "a"}])
    b = await rt.sessions.append(right.id, [{"kind": "assistant", "content": "b"}])
    m = await rt.sessions.merge([a.id, b.id])

    graph = await rt.sessions.lineage(m.id)
    assert graph.root == m.id
    assert {n.id for n in graph.nodes} == {root.id, left.id, right.id, a.id, b.id, m.id}
    assert {(e.parent, e.child) for e in graph.edges} == {
        (root.id, left.id),
        (root.id, right.id),
        (left.id, a.id),
        (right.id, b.id),
        (a.id, m.id),
        (b.id, m.id),
    }
    by_id = {n.id: n for n in graph.nodes}
    assert (by_id[root.id].op, by_id[root.id].length) == ("create", 1)
    assert (by_id[m.id].op, by_id[m.id].length) == ("merge", 3)
    assert not any(n.stub for n in graph.nodes)
    assert graph.nodes[0].id == root.id  # oldest first

    assert await rt.sessions.ancestors(m.id) == [n.id for n in graph.nodes if n.id != m.id]
    assert set(await rt.sessions.descendants(root.id)) == {left.id, right.id, a.id, b.id, m.id}
    assert await rt.sessions.descendants(m.id) == []
    assert set(await rt.sessions.ancestors(a.id)) == {root.id, left.id}

    text = graph.mermaid()
    lines = text.splitlines()
    assert lines[0] == "graph TD"
    for edge in graph.edges:
        assert f"    {edge.parent} --> {edge.child}" in lines
    assert f'    {m.id}["{m.id}<br/>merge · 3 chunks"]' in lines
    assert lines[-1] == f"    style {m.id} stroke-width:3px"


async def test_lineage_from_the_middle_goes_both_ways_within_depth(rt: Runtime) -> None:
    chain: list[SessionInfo] = [await rt.sessions.create([{"kind": "user", "content": "0"}])]
    for i in range(1, 6):
        chain.append(await rt.sessions.append(chain[-1].id, [{"kind": "user", "content": str(i)}]))
    ids = [s.id for s in chain]
    near = await rt.sessions.lineage(ids[3], depth=1)
    assert {n.id for n in near.nodes} == {ids[2], ids[3], ids[4]}
    assert {(e.parent, e.child) for e in near.edges} == {(ids[2], ids[3]), (ids[3], ids[4])}
    assert await rt.sessions.ancestors(ids[3], depth=2) == [ids[1], ids[2]]
    assert await rt.sessions.descendants(ids[3]) == [ids[4], ids[5]]
    up_only = await rt.sessions.lineage(ids[3], depth=20, down=False)
    assert [n.id for n in up_only.nodes] == ids[:4]


async def test_siblings_appear_in_the_neighbourhood_but_not_among_ancestors(rt: Runtime) -> None:
    root = await rt.sessions.create([{"kind": "user", "content": "r"}])
    a, b = await rt.sessions.fork(root.id, count=2)
    around = await rt.sessions.lineage(a.id, depth=2)
    assert {n.id for n in around.nodes} == {root.id, a.id, b.id}
    assert await rt.sessions.ancestors(a.id) == [root.id]


@pytest.mark.parametrize("depth", [0, 1001])
async def test_lineage_depth_is_bounded(rt: Runtime, depth: int) -> None:
    s = await rt.sessions.create()
    with pytest.raises(InvalidInputError, match="depth must be between 1 and 1000"):
        await rt.sessions.lineage(s.id, depth=depth)


async def test_a_crowded_lineage_is_cut_at_max_nodes_and_says_so(rt: Runtime) -> None:
    root = await rt.sessions.create([{"kind": "user", "content": "popular"}])
    forks = await rt.sessions.fork(root.id, count=30)
    whole = await rt.sessions.lineage(root.id)
    assert len(whole.nodes) == 31 and not whole.truncated
    assert "truncated" not in whole.mermaid()
    cut = await rt.sessions.lineage(root.id, max_nodes=10)
    assert cut.truncated and len(cut.nodes) == 10
    ids = {n.id for n in cut.nodes}
    assert root.id in ids and ids <= {root.id, *(f.id for f in forks)}
    assert all(e.parent in ids and e.child in ids for e in cut.edges) and len(cut.edges) == 9
    assert cut.mermaid().splitlines()[-1].startswith("    %% truncated at 10 nodes")
    assert len(await rt.sessions.descendants(root.id)) == 30  # the id lists are not cut at 500
    with pytest.raises(InvalidInputError, match="max_nodes"):
        await rt.sessions.lineage(root.id, max_nodes=0)
