"""A recall's snippets cost bounded work: one pass over each hit for all terms, within a shared budget.

Snippets are cut on the event loop, so a recall of k long items with a long query must not scan
each item once per term (a 200,000-character item and 128 terms took most of a second, holding
up every other request). The terms are found in one pass, and the characters scanned are shared
among the hits (``SNIPPET_SCAN``, at least ``SNIPPET_MIN_SCAN`` each).
"""

from __future__ import annotations

import pytest

from runtime import Runtime
from runtime.memory.service import SNIPPET_MIN_SCAN, SNIPPET_SCAN
from runtime.memory.text import snippet

pytestmark = pytest.mark.anyio


def filler(chars: int) -> str:
    return ("lorem ipsum dolor " * (chars // 18 + 1))[:chars]


def test_a_term_past_the_scan_does_not_steer_the_snippet() -> None:
    content = filler(50_000) + " needle " + filler(1_000)
    assert "needle" in snippet(content, ["needle"])
    cut = snippet(content, ["needle"], scan=40_000)
    assert "needle" not in cut and cut.startswith("lorem ipsum")


def test_one_pass_finds_the_window_with_the_most_distinct_terms() -> None:
    content = "alpha " + filler(5_000) + " beta gamma Delta " + filler(5_000) + " beta"
    assert snippet(content, ["beta", "gamma", "delta", "alpha"]).startswith("…")
    assert "beta gamma Delta" in snippet(content, ["beta", "gamma", "delta", "alpha"])
    assert snippet("the alphabet, then alpha", ["alpha"], width=200) == "the alphabet, then alpha"


async def test_long_items_share_the_scan_budget_of_a_recall(rt: Runtime) -> None:
    at = SNIPPET_SCAN // 2  # found when one item has the whole budget, not when five share it
    assert at > SNIPPET_MIN_SCAN
    long_item = filler(at) + " needle " + filler(1_000)
    await rt.memory.remember(long_item, path="only")
    (hit,) = await rt.memory.recall("needle")
    assert "needle" in hit.snippet
    for i in range(4):
        await rt.memory.remember(long_item, path=f"more/{i}")
    hits = await rt.memory.recall("needle", k=5)
    assert len(hits) == 5 and all("needle" not in h.snippet for h in hits)
