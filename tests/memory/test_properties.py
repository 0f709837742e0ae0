"""Properties of recall over random small corpora, in Latin and CJK text alike.

Whatever the corpus: every hit shares a term with the query and scores above zero, every item
that shares a term is a hit (when k is large enough), hits come best first, and where no IDF is
scores equal rank-bm25's on the same tokens (given the same IDF, ``tests.memory.oracle``).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import Runtime
from runtime.memory.text import query_terms, tokenize
from tests.memory.oracle import LuceneIdfBM25

pytestmark = pytest.mark.anyio

WORDS = ["alpha", "beta", "gamma", "delta", "机器", "学习", "東京", "ラーメン", "猫", "x1"]
_projects = itertools.count()

documents = st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join), min_size=1, max_size=12)
query = st.lists(st.sampled_from([*WORDS, "absent", "缺席"]), min_size=1, max_size=3).map(" ".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=documents, q=query)
async def test_recall_returns_exactly_the_items_sharing_a_term(home: Path, docs: list[str], q: str) -> None:
    async with Runtime.open(home, project=f"p{next(_projects)}") as rt:
        ids = [(await rt.memory.remember(d, path=f"d{i}")).id for i, d in enumerate(docs)]
        hits = await rt.memory.recall(q, k=100)
    terms = set(query_terms(q))
    tokenized = [tokenize(d) for d in docs]
    sharing = {ids[i] for i, toks in enumerate(tokenized) if terms & set(toks)}
    assert {h.memory_id for h in hits} == sharing
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    if hits:
        oracle = LuceneIdfBM25(tokenized).get_scores(query_terms(q))
        by_id = dict(zip(ids, oracle, strict=True))
        for hit in hits:
            assert hit.score == pytest.approx(by_id[hit.memory_id], rel=1e-9)
