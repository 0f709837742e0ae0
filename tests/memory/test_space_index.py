"""The in-memory index of one space's vectors (``runtime.memory.space_index.SpaceIndex``): rows added in
batches past its first capacity, an item's vector replaced in place, a scope filter, int8 round trips."""

from __future__ import annotations

import numpy as np  # the test extra has it (rank-bm25's dependency)
import pytest

from runtime.memory.space_index import SpaceIndex, quantize


def rows(vectors: object, seqs: range, scope: str = "user") -> list[tuple[int, str, float, bytes]]:
    return [(seq, scope, s, b) for seq, (s, b) in zip(seqs, quantize(vectors), strict=True)]


def test_batches_grow_the_index_and_a_new_vector_replaces_the_old() -> None:
    rng = np.random.default_rng(7)
    unit = rng.standard_normal((150, 16)).astype(np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    index = SpaceIndex()
    index.add(rows(unit[:50], range(1, 51)))
    index.add(rows(unit[50:], range(51, 151), scope="agent"))  # past the first capacity of 64
    assert index.size == 150 and len(index.seqs) >= 150
    best = index.top(unit[120], 3, None)
    assert best[0][0] == 121 and best[0][1] == pytest.approx(1.0, abs=0.02)  # int8 keeps the cosine within 0.02
    assert index.top(unit[120], 3, "user")[0][0] != 121 and index.top(unit[120], 3, "resources") == []
    index.add(rows(unit[120:121], range(5, 6)))  # item 5 now holds what 121 holds: same row, new vector
    assert index.size == 150 and {seq for seq, _ in index.top(unit[120], 2, None)} == {5, 121}
    index.forget([121, 999])  # 121 was deleted (999 was never here): its row scores 0 from now on
    assert [seq for seq, score in index.top(unit[120], 2, None) if score > 0.9] == [5]
    index.add(rows(unit[120:121], range(121, 122)))  # embedded again: a row of its own
    assert index.size == 151 and {seq for seq, _ in index.top(unit[120], 2, None)} == {5, 121}


def test_fusion_puts_what_both_find_first_and_keeps_scores_above_zero() -> None:
    from runtime.memory.model import MemoryItem
    from runtime.memory.semantic import fuse
    from runtime.memory.store import Found

    def found(name: str, score: float) -> Found:
        item = MemoryItem(
            id=name, uri=f"memory://user/{name}", scope="user", content=name, created_at=0, updated_at=0,
            tenant="local", project="default",
        )  # fmt: skip
        return Found(item, score)

    keyword = [found("words", 9.0), found("both", 3.0)]
    semantic = [found("meaning", 0.91), found("both", 0.90), found("far", 0.70)]
    fused = fuse(keyword, semantic, 10)
    assert [(f.item.id, how) for f, how in fused] == [
        ("both", "both"),
        ("meaning", "semantic"),
        ("words", "keyword"),
    ]  # "far", the worst cosine and no word, scores 0: not a hit
    assert all(f.score > 0 for f, _ in fused) and fuse([], [], 5) == []
