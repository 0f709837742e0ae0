"""The plain-SQL BM25 index against independent computations of the same formula.

The oracle is written here from the formula alone (Lucene's idf ``ln(1 + (N - df + 0.5)/(df + 0.5))``,
k1 = 1.2, b = 0.75); rank-bm25's BM25Okapi given that idf (tests/memory/oracle.py, the SQLite
store's oracle too) cross-checks it with its own term counts, lengths, avgdl and tf normalisation;
and the embedded SQLite store, given the same items, must score them the same. The corpus mixes
Latin, Chinese and Japanese text, tokenized by runtime.memory.text like the SQLite store's.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import asyncpg
import pytest

from runtime import Runtime
from runtime.memory.text import query_terms, tokenize
from runtime.store.core.dialect import POSTGRES
from runtime.store.postgres import PostgresDatabase, migrations, recall, schema
from runtime.store.postgres.executor import drive
from tests.memory.oracle import LuceneIdfBM25

pytestmark = pytest.mark.anyio

LATIN = [
    "memory",
    "durable",
    "agent",
    "session",
    "worker",
    "lease",
    "commit",
    "rank",
    "query",
    "store",
    "naïve",
    "Café",
]
CHINESE = ["机器学习", "数据库", "记忆", "会话", "检索", "持久化", "工作流", "代理"]
JAPANESE = ["データベース", "記憶", "検索", "セッション", "ひらがな", "東京", "永続化", "エージェント"]
VOCAB = LATIN + CHINESE + JAPANESE
QUERIES = [
    "memory agent",
    "数据库 记忆",
    "データベース 検索",
    "机器",
    "東京の記憶",
    "lease commit 检索",
    "cafe",
    "学习",
]


def make_corpus(n: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    docs = []
    for _ in range(n):
        words = rnd.choices(VOCAB, weights=[1 / (i + 1) for i in range(len(VOCAB))], k=rnd.randint(1, 25))
        joiner = "" if rnd.random() < 0.3 else " "  # CJK is often written without spaces
        docs.append(joiner.join(words))
    return docs


def lucene_scores(docs: list[list[str]], query: list[str]) -> dict[int, float]:
    """BM25 from the formula, by hand: {doc index: score} for the docs sharing a term with the query."""
    n = len(docs)
    avgdl = sum(map(len, docs)) / n
    counts = [Counter(d) for d in docs]
    out: dict[int, float] = {}
    for t in dict.fromkeys(query):
        df = sum(1 for c in counts if t in c)
        if not df:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, c in enumerate(counts):
            if tf := c.get(t):
                out[i] = out.get(i, 0.0) + idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(docs[i]) / avgdl))
    return out


@pytest.fixture
async def mdb(pg_url: str) -> AsyncIterator[PostgresDatabase]:
    await migrations.apply(pg_url, schema.MEMORY)
    db = PostgresDatabase(pg_url, max_size=6, write_lanes=3)
    await db.open()
    try:
        yield db
    finally:
        await db.close()


async def space(db: PostgresDatabase, tenant: str = "t", project: str = "p") -> int:
    async def fn(conn: asyncpg.Connection) -> int:
        return int(
            await conn.fetchval(
                "INSERT INTO memory_spaces (tenant, project) VALUES ($1, $2) RETURNING id", tenant, project
            )
        )

    return await db.write(fn)


async def add(db: PostgresDatabase, space_id: int, content: str, scope: str = "s") -> int:
    async def fn(conn: asyncpg.Connection) -> int:
        seq = int(
            await conn.fetchval(
                "INSERT INTO memory_items (id, space_id, tenant, project, scope, uri, content, tags, created_at,"
                " updated_at) SELECT 'mem_' || md5(random()::text), $1, 't', 'p', $2, 'u/' || md5(random()::text),"
                " $3, '[]', 0, 0 RETURNING seq",
                space_id,
                scope,
                content,
            )
        )
        await drive(conn, recall.index(POSTGRES, space_id, [(seq, recall.term_counts(content))]))
        return seq

    return await db.write(fn)


async def scores(db: PostgresDatabase, space_id: int, query: str, k: int = 10_000, **kw: str) -> dict[int, float]:
    async def fn(conn: asyncpg.Connection) -> dict[int, float]:
        rows = await drive(conn, recall.search(POSTGRES, space_id, query_terms(query), k, columns="top.seq", **kw))
        return {int(r["seq"]): float(r["score"]) for r in rows}

    return await db.read(fn)


def assert_close(got: dict[int, float], want: dict[int, float]) -> None:
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9), key


async def test_scores_agree_with_the_formula_and_with_rank_bm25(mdb: PostgresDatabase) -> None:
    sid = await space(mdb)
    docs = make_corpus(300)
    seqs = [await add(mdb, sid, d) for d in docs]
    tokenized = [tokenize(d) for d in docs]
    okapi = LuceneIdfBM25(tokenized)
    for q in QUERIES:
        terms = query_terms(q)
        assert terms, q
        want = {seqs[i]: s for i, s in lucene_scores(tokenized, terms).items()}
        assert want, f"the corpus should hold terms of {q!r}"
        got = await scores(mdb, sid, q)
        assert_close(got, want)
        cross = okapi.get_scores(terms)
        assert_close(got, {seqs[i]: float(s) for i, s in enumerate(cross) if s > 0})
        top = await scores(mdb, sid, q, k=10)
        assert list(top) == sorted(want, key=lambda s: (-want[s], s))[:10]


async def test_cjk_query_inside_unspaced_text_is_found(mdb: PostgresDatabase) -> None:
    sid = await space(mdb)
    hit = await add(mdb, sid, "私は東京でデータベースの記憶を検索した")
    await add(mdb, sid, "我们用机器学习做检索")
    await add(mdb, sid, "nothing related here")
    assert list(await scores(mdb, sid, "記憶")) == [hit]
    assert list(await scores(mdb, sid, "データベース")) == [hit]


async def test_unindexed_and_reindexed_items_leave_the_statistics_exact(mdb: PostgresDatabase) -> None:
    sid = await space(mdb)
    docs = make_corpus(120, seed=3)
    seqs = [await add(mdb, sid, d) for d in docs]
    live = dict(zip(seqs, docs, strict=True))
    rnd = random.Random(5)
    gone = rnd.sample(seqs, 30)
    changed = rnd.sample([s for s in seqs if s not in gone], 20)

    async def edit(conn: asyncpg.Connection) -> None:
        assert await drive(conn, recall.unindex(POSTGRES, sid, gone)) == 30
        assert await drive(conn, recall.unindex(POSTGRES, sid, gone)) == 0  # already out: ignored
        await drive(conn, recall.unindex(POSTGRES, sid, changed))
        await drive(
            conn, recall.index(POSTGRES, sid, [(s, recall.term_counts("記憶 memory " + live[s])) for s in changed])
        )

    await mdb.write(edit)
    for s in gone:
        del live[s]
    for s in changed:
        live[s] = "記憶 memory " + live[s]
    order = list(live)
    tokenized = [tokenize(live[s]) for s in order]

    async def stats(conn: asyncpg.Connection) -> tuple[int, int]:
        return await drive(conn, recall.corpus(POSTGRES, sid))

    assert await mdb.read(stats) == (len(order), sum(map(len, tokenized)))
    for q in QUERIES:
        want = {order[i]: s for i, s in lucene_scores(tokenized, query_terms(q)).items()}
        assert_close(await scores(mdb, sid, q), want)


async def test_spaces_rank_by_their_own_statistics_and_scope_filters(mdb: PostgresDatabase) -> None:
    one, two = await space(mdb, "t", "one"), await space(mdb, "t", "two")
    a = await add(mdb, one, "memory agent", scope="x")
    b = await add(mdb, one, "memory", scope="y")
    for _ in range(5):
        await add(mdb, two, "memory memory memory")
    only = await scores(mdb, one, "memory")
    assert_close(
        only,
        {
            i: s
            for i, s in zip((a, b), lucene_scores([["memory", "agent"], ["memory"]], ["memory"]).values(), strict=True)
        },
    )
    assert list(await scores(mdb, one, "memory", scope="y")) == [b]
    assert await scores(mdb, one, "absent") == {}

    async def with_items(conn: asyncpg.Connection) -> list[asyncpg.Record]:
        return await drive(conn, recall.search(POSTGRES, one, ["memory"], 1, columns="i.content, top.seq"))

    rows = await mdb.read(with_items)
    assert [r["content"] for r in rows] == ["memory"]  # the shorter item ranks first


async def test_concurrent_writers_lose_nothing(mdb: PostgresDatabase, pg_url: str) -> None:
    """Two databases (as two processes would have: separate pools) write and unindex concurrently,
    many writes group-committed together; afterwards the corpus statistics and every score are
    exactly those of the items that are there."""
    sid = await space(mdb)
    other = PostgresDatabase(pg_url, max_size=6, write_lanes=3)
    await other.open()
    docs = make_corpus(400, seed=11)
    seqs: dict[int, str] = {}
    removed: list[int] = []
    try:

        async def writer(db: PostgresDatabase, part: list[str], seed: int) -> None:
            rnd = random.Random(seed)
            for i, d in enumerate(part):
                seqs[await add(db, sid, d)] = d
                if i % 10 == 9:
                    victim = rnd.choice(list(seqs))

                    async def drop(conn: asyncpg.Connection, victim: int = victim) -> int:
                        return await drive(conn, recall.unindex(POSTGRES, sid, [victim]))

                    if await db.write(drop):
                        removed.append(victim)

        async with anyio.create_task_group() as tg:
            for w in range(8):
                tg.start_soon(writer, mdb if w % 2 else other, docs[w::8], w)
    finally:
        await other.close()
    live = [s for s in seqs if s not in removed]
    tokenized = [tokenize(seqs[s]) for s in live]

    async def stats(conn: asyncpg.Connection) -> tuple[int, int]:
        return await drive(conn, recall.corpus(POSTGRES, sid))

    assert await mdb.read(stats) == (len(live), sum(map(len, tokenized)))
    for q in QUERIES:
        want = {live[i]: s for i, s in lucene_scores(tokenized, query_terms(q)).items()}
        assert_close(await scores(mdb, sid, q), want)


async def test_both_backends_score_the_same_items_the_same(mdb: PostgresDatabase, tmp_path: Path) -> None:
    """The same items remembered on the embedded SQLite store and indexed here get the same scores."""
    docs = make_corpus(200, seed=21)
    sid = await space(mdb)
    seqs = [await add(mdb, sid, d) for d in docs]
    async with Runtime.open(tmp_path / "home") as rt:
        ids = [(await rt.memory.remember(d, path=f"corpus/{i}")).id for i, d in enumerate(docs)]
        for q in QUERIES:
            on_pg = await scores(mdb, sid, q, k=10)
            on_sqlite = {ids.index(h.memory_id): h.score for h in await rt.memory.recall(q, k=10)}
            assert sorted(on_pg.values(), reverse=True) == pytest.approx(sorted(on_sqlite.values(), reverse=True))
            for seq, score in on_pg.items():
                i = seqs.index(seq)
                if i in on_sqlite:
                    assert on_sqlite[i] == pytest.approx(score, rel=1e-9), q
