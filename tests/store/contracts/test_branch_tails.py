"""``SessionStore.branch_tails``, on every backend: what a merge compares, read past the shared history.

A merge must cost what its branches add, not the history they share, and give exactly the result
a comparison of whole branches gives (``merged_tail`` over every uid): both are checked here, the
second over a seeded mix of forks, appends, detaches, concat and append merges.
"""

from __future__ import annotations

import itertools
import random

import pytest

from runtime.sessions import SessionService
from runtime.sessions.merge import merged_tail, merged_tail_of
from runtime.sessions.store import SessionStore
from tests.store.contracts import test_session_store as contract

# The session contract's fixtures (every backend, and the in-memory store), under the names tests ask for.
kind, dsn, stores = contract.kind, contract.dsn, contract.stores
globals()["store"] = contract.store  # bound by name: a plain import would read as shadowed by each parameter

pytestmark = pytest.mark.anyio


def said(text: str) -> list[dict[str, str]]:
    return [{"kind": "assistant", "content": text}]


async def test_two_forks_of_a_long_session_are_compared_only_past_what_they_share(store: SessionStore) -> None:
    sessions = SessionService(store)
    base = await sessions.create([{"kind": "user", "content": str(i)} for i in range(300)])
    a, b = await sessions.fork(base.id, count=2)
    a2 = await sessions.append(a.id, said("a"))
    b2 = await sessions.append(b.id, said("b"))
    view = await store.branch_tails([a2.id, b2.id])
    uid_a, uid_b = (await store.uids(a2.id))[-1], (await store.uids(b2.id))[-1]
    assert view.start == 300 and view.tails == ((uid_a,), (uid_b,)) and view.in_first == frozenset()
    merged = await sessions.merge([a2.id, b2.id])
    assert merged.length == 302 and merged.metadata["shared_prefix"] == 300
    assert [c.content for c in await sessions.chunks(merged.id, 299)] == ["299", "a", "b"]


async def test_a_branch_holding_the_first_one_whole_is_compared_from_where_the_first_ends(
    store: SessionStore,
) -> None:
    sessions = SessionService(store)
    base = await sessions.create([{"kind": "user", "content": str(i)} for i in range(20)])
    longer = await sessions.append(base.id, said("more"))
    view = await store.branch_tails([base.id, longer.id])
    assert view.start == 20 and view.tails[0] == () and len(view.tails[1]) == 1
    assert merged_tail_of(view) == (20, [(1, 20)])


async def test_merge_inputs_give_the_merge_whole_branches_give(store: SessionStore) -> None:
    sessions = SessionService(store)
    rng = random.Random(14)
    made = [(await sessions.create([{"kind": "user", "content": f"r{i}"} for i in range(3)])).id]
    for step in range(40):
        pick = rng.choice(made[-6:] if rng.random() < 0.6 else made)
        move = rng.choice(["append", "append", "fork", "detach", "merge", "concat"])
        if move == "append":
            made.append((await sessions.append(pick, said(f"s{step}"))).id)
        elif move == "fork":
            made.extend(f.id for f in await sessions.fork(pick, count=2))
        elif move == "detach":
            made.append((await sessions.detach(pick)).id)
        else:
            others = [m for m in rng.sample(made, min(2, len(made))) if m != pick]
            if others:
                strategy = "concat" if move == "concat" else "append"
                made.append((await sessions.merge([pick, *others], strategy=strategy)).id)
    uids = {m: await store.uids(m) for m in made}
    combos = [list(c) for c in itertools.combinations(made[-12:], 2)] + [rng.sample(made, 3) for _ in range(30)]
    for ids in combos:
        assert merged_tail_of(await store.branch_tails(ids)) == merged_tail([uids[i] for i in ids]), ids
