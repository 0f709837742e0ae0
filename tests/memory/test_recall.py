"""Recall: BM25 ranking (rank-bm25 with Lucene's IDF is the oracle), positive scores only, CJK, scopes, snippets."""

from __future__ import annotations

import math
import random

import anyio
import pytest

from runtime import InvalidInputError, Runtime
from runtime.memory.text import query_terms, tokenize
from tests.memory.oracle import LuceneIdfBM25

pytestmark = pytest.mark.anyio

VOCAB = [f"w{i}" for i in range(1500)]
ZIPF = [1 / (i + 1) for i in range(len(VOCAB))]
CJK_WORDS = ["机器学习", "深度学习", "数据库", "自然语言", "東京", "ラーメン", "猫", "検索エンジン"]


def _corpus(n: int, seed: int = 7) -> list[str]:
    """A fixed corpus: Zipf-distributed words, a third of the documents with CJK words mixed in."""
    rnd = random.Random(seed)
    docs = []
    for i in range(n):
        words = rnd.choices(VOCAB, ZIPF, k=rnd.randint(8, 40))
        if i % 3 == 0:
            words += rnd.choices(CJK_WORDS, k=rnd.randint(1, 4))
            rnd.shuffle(words)
        docs.append(" ".join(words))
    return docs


async def _remember_all(rt: Runtime, docs: list[str]) -> list[str]:
    ids: list[str] = [""] * len(docs)

    async def one(i: int) -> None:
        ids[i] = (await rt.memory.remember(docs[i], path=f"corpus/{i}")).id

    async with anyio.create_task_group() as tg:
        for i in range(len(docs)):
            tg.start_soon(one, i)
    return ids


async def test_ranking_and_scores_match_rank_bm25_with_the_same_idf(rt: Runtime) -> None:
    docs = _corpus(600)
    ids = await _remember_all(rt, docs)
    oracle = LuceneIdfBM25([tokenize(d) for d in docs])
    rnd = random.Random(11)
    queries = [" ".join(rnd.sample(VOCAB[5:200], 3)) for _ in range(25)]
    queries += [f"{w} {rnd.choice(VOCAB[20:100])}" for w in CJK_WORDS]
    queries += [f"w0 w1 {rnd.choice(VOCAB[20:300])}" for _ in range(5)]  # terms in most items: FTS5 clamps these
    overlaps = []
    for query in queries:
        scores = oracle.get_scores(query_terms(query))
        best = sorted(range(len(docs)), key=lambda i: -scores[i])[:10]
        hits = await rt.memory.recall(query, k=10)
        assert hits, query
        # Scores equal the oracle's item by item, and the hits are its ten best (ties may swap places).
        for hit in hits:
            assert hit.score == pytest.approx(scores[ids.index(hit.memory_id)], rel=1e-9), query
        assert [h.score for h in hits] == pytest.approx([scores[i] for i in best], rel=1e-9), query
        overlaps.append(len({h.memory_id for h in hits} & {ids[i] for i in best}) / len(best))
    assert sum(overlaps) / len(overlaps) >= 0.95


async def test_a_one_word_match_scores_like_lucene_bm25_in_a_small_store(rt: Runtime) -> None:
    """The issue's case: an exact one-word match in a store of two used to score ~1e-06."""
    await rt.memory.remember("kubernetes")
    await rt.memory.remember("something else entirely")
    (hit,) = await rt.memory.recall("kubernetes")
    # N=2, df=1: idf = ln(1 + 1.5/1.5) = ln 2; tf=1, dl=1, avgdl=2: tf part = 2.2 / (1 + 1.2*(0.25 + 0.375))
    assert hit.score == pytest.approx(math.log(2) * 2.2 / (1 + 1.2 * 0.625), rel=1e-12)
    assert hit.score > 0.5


async def test_remember_then_recall_finds_it_at_once(rt: Runtime) -> None:
    item = await rt.memory.remember("The deploy key lives in the vault under ops/deploy", tags=["ops"])
    hits = await rt.memory.recall("where is the deploy key?")
    assert [h.memory_id for h in hits] == [item.id]
    assert hits[0].uri == item.uri == f"memory://user/{item.id}"
    assert hits[0].score > 0
    assert "deploy key" in hits[0].snippet


async def test_items_sharing_no_term_are_never_hits(rt: Runtime) -> None:
    await rt.memory.remember("apples and pears")
    await rt.memory.remember("bananas")
    await rt.memory.remember("apples everywhere apples")  # "apples" in 2 of 3 items: IDF ≤ 0 in the raw formula
    hits = await rt.memory.recall("apples oranges", k=10)
    assert {h.snippet for h in hits} == {"apples and pears", "apples everywhere apples"}
    assert all(h.score > 0 for h in hits)
    assert hits[0].snippet == "apples everywhere apples"  # higher term frequency ranks first
    assert await rt.memory.recall("oranges") == []


async def test_a_single_item_store_still_recalls_with_a_positive_score(rt: Runtime) -> None:
    await rt.memory.remember("only one thing here")
    hits = await rt.memory.recall("thing")
    assert len(hits) == 1 and hits[0].score > 0


async def test_chinese_and_japanese_queries_find_matching_items(rt: Runtime) -> None:
    zh = await rt.memory.remember("用户喜欢用Python做机器学习，不喜欢Java。")
    ja = await rt.memory.remember("東京でラーメンを食べるのが好きです")
    await rt.memory.remember("The user likes ramen in Tokyo")
    await rt.memory.remember("数据库迁移在周五进行")
    th = await rt.memory.remember("ผมชอบกินข้าวผัดทุกวัน")
    assert (await rt.memory.recall("机器学习"))[0].memory_id == zh.id
    assert (await rt.memory.recall("ラーメン"))[0].memory_id == ja.id
    assert (await rt.memory.recall("東京のラーメン屋"))[0].memory_id == ja.id
    assert [h.memory_id for h in await rt.memory.recall("python")] == [zh.id]  # Latin inside a CJK run
    assert [h.memory_id for h in await rt.memory.recall("ข้าวผัด")] == [th.id]
    hit = (await rt.memory.recall("学习"))[0]
    assert hit.memory_id == zh.id and "机器学习" in hit.snippet


async def test_full_width_latin_matches_ascii(rt: Runtime) -> None:
    item = await rt.memory.remember("ＰＯＳＴＧＲＥＳ version 16")
    assert [h.memory_id for h in await rt.memory.recall("postgres")] == [item.id]


async def test_scope_filter_and_k(rt: Runtime) -> None:
    for i in range(4):
        await rt.memory.remember(f"note {i} about kubernetes", scope="agent")
    user = await rt.memory.remember("user note about kubernetes", scope="user")
    assert [h.memory_id for h in await rt.memory.recall("kubernetes", scope="user")] == [user.id]
    agent_hits = await rt.memory.recall("kubernetes", scope="agent", k=3)
    assert len(agent_hits) == 3 and all(h.uri.startswith("memory://agent/") for h in agent_hits)
    assert len(await rt.memory.recall("kubernetes", k=10)) == 5
    scores = [h.score for h in await rt.memory.recall("kubernetes", k=10)]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(
    "query",
    ['"', "AND", "a OR", "NEAR(x y)", "col:value", "*", "-minus", "x^y", "(((", "'; DROP TABLE memory_items;--"],
)
async def test_fts_syntax_in_queries_is_just_text(rt: Runtime, query: str) -> None:
    await rt.memory.remember("near value minus and drop table")
    hits = await rt.memory.recall(query)
    assert all(h.score > 0 for h in hits)
    assert len(await rt.memory.list()) == 1


async def test_punctuation_only_query_has_no_hits_and_empty_query_is_an_error(rt: Runtime) -> None:
    await rt.memory.remember("something")
    assert await rt.memory.recall("?!…") == []
    with pytest.raises(InvalidInputError, match="non-empty query"):
        await rt.memory.recall("   ")
    with pytest.raises(InvalidInputError, match="k must be"):
        await rt.memory.recall("something", k=0)
    with pytest.raises(InvalidInputError, match="not one of"):
        await rt.memory.recall("something", scope="global")


async def test_snippet_is_the_window_around_the_matches(rt: Runtime) -> None:
    filler = "lorem ipsum dolor sit amet " * 30
    await rt.memory.remember(filler + "the staging database password rotates monthly " + filler)
    hit = (await rt.memory.recall("staging password"))[0]
    assert "staging database password" in hit.snippet
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert len(hit.snippet) <= 202


async def test_a_pasted_document_as_query_still_recalls(rt: Runtime) -> None:
    item = await rt.memory.remember("zebra crossing rules", tags=None)  # type: ignore[arg-type]
    query = "zebra " + " ".join(f"filler{i}" for i in range(5000))
    assert [h.memory_id for h in await rt.memory.recall(query)] == [item.id]


async def test_an_empty_store_recalls_nothing_and_lists_nothing(rt: Runtime) -> None:
    assert await rt.memory.recall("anything") == []
    assert await rt.memory.list() == []
    assert await rt.memory.forget(uri="memory://user/x") == 0


async def test_scores_after_forgetting_and_replacing_count_only_what_remains(rt: Runtime) -> None:
    """N and df come from the index as it is now: a forgotten or replaced item no longer counts."""
    docs = {f"d{i}": " ".join(random.Random(i).choices(VOCAB[:40], k=12)) for i in range(30)}
    for path, content in docs.items():
        await rt.memory.remember(content, path=path)
    for i in range(0, 30, 3):
        await rt.memory.forget(uri=f"memory://user/d{i}")
        del docs[f"d{i}"]
    for i in range(1, 30, 6):
        docs[f"d{i}"] = "w1 w2 replaced text w3"
        await rt.memory.remember(docs[f"d{i}"], path=f"d{i}")
    paths = list(docs)
    oracle = LuceneIdfBM25([tokenize(docs[p]) for p in paths])
    for query in ("w1 w2", "w5 w7 w11", "replaced", "w0"):
        scores = dict(zip(paths, oracle.get_scores(query_terms(query)), strict=True))
        hits = await rt.memory.recall(query, k=100)
        assert {h.uri.rsplit("/", 1)[1] for h in hits} == {p for p, s in scores.items() if s > 0}
        for hit in hits:
            assert hit.score == pytest.approx(scores[hit.uri.rsplit("/", 1)[1]], rel=1e-9), query
