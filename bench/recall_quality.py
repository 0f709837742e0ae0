"""Recall quality: keyword, semantic and hybrid recall on a labelled set (issue 30).

    .venv/bin/python bench/recall_quality.py            # SQLite (a temporary home)
    .venv/bin/python bench/recall_quality.py --store postgresql://…   # a migrated PostgreSQL store

The set (``bench/recall_quality_set.py``): 215 facts, 115 questions each answered by one fact, a
third of them in Chinese or Japanese and a tenth cross-lingual. A question *shares a word* with its
fact when their terms (``runtime.memory.text.query_terms``: words, CJK bigrams) meet beyond
function words; that is measured here, not declared. Prints recall@5 and nDCG@10 per mode for
all questions and for each group, and exits 1 when the issue's targets are missed:
hybrid >= keyword + 0.25 recall@5 on the questions sharing no word, and hybrid >= keyword - 0.02
on those sharing one (fusion must not hurt what BM25 already finds).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.recall_quality_set import DISTRACTORS, PAIRS  # noqa: E402
from runtime import Runtime  # noqa: E402
from runtime.memory.text import query_terms  # noqa: E402

MODES = ("keyword", "semantic", "hybrid")
#: Function words that do not count as sharing a word (English; CJK particles make no bigram of their own).
STOP = set(
    [
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "were",
        "be",
        "to",
        "of",
        "in",
        "on",
        "at",
        "for",
        "and",
        "or",
        "my",
        "i",
        "me",
        "we",
        "our",
        "us",
        "do",
        "does",
        "did",
        "what",
        "which",
        "who",
        "whom",
        "where",
        "when",
        "how",
        "why",
        "it",
        "its",
        "this",
        "that",
        "he",
        "she",
        "his",
        "her",
        "they",
        "their",
        "there",
        "have",
        "has",
        "with",
        "by",
        "from",
        "as",
        "s",
    ]
)


def language(text: str) -> str:
    if any("\u3040" <= c <= "\u30ff" for c in text):
        return "ja"
    if any("\u4e00" <= c <= "\u9fff" for c in text):
        return "zh"
    return "en"


def shares_a_word(question: str, fact: str) -> bool:
    return bool((set(query_terms(question)) & set(query_terms(fact))) - STOP)


def groups(question: str, fact: str) -> list[str]:
    out = ["all", "shared" if shares_a_word(question, fact) else "no-shared"]
    if language(question) != "en" or language(fact) != "en":
        out.append("cjk")
    if (language(question) == "en") != (language(fact) == "en"):
        out.append("cross-lingual")
    return out


async def measure(store: str | None) -> dict[str, dict[str, tuple[float, float, int]]]:
    with tempfile.TemporaryDirectory() as tmp:
        async with Runtime.open(Path(tmp) / "home", store=store, workers=0, embedder="local") as rt:
            uris = {}
            for fact in [f for f, _ in PAIRS] + DISTRACTORS:
                uris[fact] = (await rt.memory.remember(fact)).uri
            started = time.perf_counter()
            assert rt.semantic is not None
            await rt.semantic.settled()
            embed_s = time.perf_counter() - started
            sums: dict[str, dict[str, list[float]]] = {}
            for fact, question in PAIRS:
                for mode in MODES:
                    hits = [h.uri for h in await rt.memory.recall(question, k=10, mode=mode)]
                    rank = hits.index(uris[fact]) + 1 if uris[fact] in hits else 0
                    r5 = 1.0 if 0 < rank <= 5 else 0.0
                    ndcg = 1 / math.log2(rank + 1) if rank else 0.0
                    for group in groups(question, fact):
                        acc = sums.setdefault(group, {}).setdefault(mode, [0.0, 0.0, 0])
                        acc[0] += r5
                        acc[1] += ndcg
                        acc[2] += 1
    print(f"embedded {len(uris)} facts in {embed_s:.1f} s (background task, batches of 16)")
    return {g: {m: (v[0] / v[2], v[1] / v[2], int(v[2])) for m, v in by.items()} for g, by in sums.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="a store URL (default: a SQLite file in a temporary home)")
    args = parser.parse_args()
    table = anyio.run(measure, args.store)
    print(f"{'questions':<16}{'n':>4}  " + "  ".join(f"{m + ' r@5':>13} {'nDCG@10':>8}" for m in MODES))
    for group in ("all", "shared", "no-shared", "cjk", "cross-lingual"):
        row = table.get(group)
        if row:
            n = next(iter(row.values()))[2]
            cells = "  ".join(f"{row[m][0]:>13.3f} {row[m][1]:>8.3f}" for m in MODES)
            print(f"{group:<16}{n:>4}  {cells}")
    gain = table["no-shared"]["hybrid"][0] - table["no-shared"]["keyword"][0]
    loss = table["shared"]["keyword"][0] - table["shared"]["hybrid"][0]
    ok = gain >= 0.25 and loss <= 0.02
    print(f"targets: no-shared hybrid - keyword {gain:+.3f} (>= +0.25); shared keyword - hybrid {loss:+.3f} (<= 0.02)")
    print("PASS" if ok else "MISSED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
