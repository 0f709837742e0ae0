"""Snippets of ASCII text find a query's few words with ``str.find`` (``text._ascii_hits``), not the
one-pass pattern: the hits, and so the snippets, must be exactly the pattern's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.memory import text

WORDS = ["w1", "w12", "W1", "ab", "a", "b_c", "x9", "ABC"]
SEPARATORS = [" ", "  ", "-", "_", ".", ",\n", "'", "1", ""]


def pattern_hits(content: str, terms: tuple[str, ...]) -> list[tuple[int, str]]:
    """What ``_hits`` found before the fast path: the pattern, case-insensitive, whole words."""
    words, lowered, _, _ = text._split(terms)
    hits: list[tuple[int, str]] = []
    found: dict[str, int] = {}
    for m in text._words_pattern(words).finditer(content):
        term = lowered.get(m.group().lower(), m.group())
        if (n := found.get(term, 0)) <= 50:
            found[term] = n + 1
            hits.append((m.start(), term))
    return sorted(hits)


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), max_size=140),
    terms=st.lists(st.sampled_from(["w1", "ab", "a", "abc", "x9", "c", "W1", "b"]), min_size=1, max_size=5),
)
def test_find_gives_the_patterns_hits(pieces: list[tuple[str, str]], terms: list[str]) -> None:
    content = "".join(w + sep for w, sep in pieces)  # words inside longer words, underscores, digits, case
    distinct = tuple(dict.fromkeys(terms))
    assert text._split(distinct)[3]  # ASCII letters and digits, few: the fast path is taken
    assert text._hits(content, distinct) == pattern_hits(content, distinct)
    # Nine words or more take the pattern: the same words plus absent ones find the same hits that way.
    absent = tuple(f"zz{i}" for i in range(9))
    assert not text._split(distinct + absent)[3]
    assert text.snippet(content, distinct, width=40) == text.snippet(content, distinct + absent, width=40)


def test_a_word_past_fifty_one_places_and_other_texts_take_the_pattern() -> None:
    content = " ".join(["w1"] * 80 + ["w12", "x_w1", "W1"])
    assert text._hits(content, ("w1",)) == pattern_hits(content, ("w1",))
    assert len(text._hits(content, ("w1",))) == 51
    assert not text._split(tuple(f"t{i}" for i in range(9)))[3]  # many words: one pass of the pattern
    assert not text._split(("kırmızı",))[3]  # non-ASCII word: IGNORECASE equates ı with i, lower() does not
    assert text.snippet("Kirmizi elma", ["kırmızı"]) == "Kirmizi elma"
