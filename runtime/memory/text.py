"""Turning text in any script into search terms, and cutting snippets.

SQLite's ``unicode61`` tokenizer splits on spaces and punctuation, so a run of Chinese or Japanese
characters (written without spaces) would be one giant token and a query for a word inside it
would find nothing. We therefore tokenize in Python and hand FTS5 a *normalised body*: our tokens
joined by spaces. A CJK run becomes its single characters plus its character bigrams
("机器学习" → 机 器 学 习 机器 器学 学习), as Lucene's CJK analysers do: single characters let
one-character queries match, bigrams reward the right word order. Thai, Lao, Myanmar and Khmer
(also written without spaces) are treated the same way, minus their combining marks. Queries go through the same
function, so index and query always agree, and the rank-bm25 test oracle uses it too.

Token characters are letters and digits (Unicode categories L* and N*, as ``unicode61``, which
also counts private-use characters); everything else separates. Text is NFKC-normalised
(full-width Latin becomes ASCII, half-width katakana becomes full-width), lower-cased and stripped
of diacritics, as ``unicode61`` does by default; since the body holds only our tokens, FTS5
re-tokenizing it yields exactly them.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

# Scripts written without spaces between words: Han, kana, Hangul (Korean attaches particles),
# and the Southeast Asian scripts Thai, Lao, Myanmar and Khmer.
_CJK_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3040, 0x30FF),  # hiragana, katakana (incl. ー)
    (0x31F0, 0x31FF),  # katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x3134F),  # CJK extensions B-H
)

SNIPPET_CHARS = 200


_CJK_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK_RANGES)


# Compiled on first use: these Unicode classes take ~4 ms to compile, paid by every server start otherwise.
@functools.cache
def _tokens() -> re.Pattern[str]:
    """A CJK run, or a run of other letters and digits ([^\\W_] is str.isalnum(): Unicode L* and N*)."""
    return re.compile(f"([{_CJK_CLASS}]+)|((?:(?![{_CJK_CLASS}])[^\\W_])+)")


@functools.cache
def _cjk_char() -> re.Pattern[str]:
    return re.compile(f"[{_CJK_CLASS}]")


def is_cjk(ch: str) -> bool:
    """True for a character of a script written without spaces (Han, kana, Hangul)."""
    return _cjk_char().match(ch) is not None


def _fold(word: str) -> str:
    """Lower-case and strip diacritics (what ``unicode61`` does with ``remove_diacritics``)."""
    if word.isascii():
        return word.lower()
    decomposed = unicodedata.normalize("NFD", word.lower())
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def _letter_runs(run: str) -> list[str]:
    """A no-space run as what ``unicode61`` counts as token characters: combining marks (Thai
    vowel and tone marks, say) dropped, punctuation inside the block (``・``, ``๏``) splitting."""
    if run.isalnum():
        return [run]
    kept: list[str] = []
    for ch in run:
        category = unicodedata.category(ch)[0]
        if category in "LN":
            kept.append(ch)
        elif category != "M":
            kept.append(" ")
    return "".join(kept).split()


#: Characters of ASCII text one C call tokenizes: a call holds the GIL throughout, and a memory is
#: tokenized on the store's writer thread while the event loop waits for the GIL to serve others.
_ASCII_PIECE = 32_768
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")
_ASCII_GAP = re.compile(r"[^a-z0-9]")


def _ascii_tokens(text: str) -> list[str]:
    """``tokenize`` of ASCII text (which NFKC leaves alone, whose letters fold by ``lower``): a regex pass
    a piece at a time, about ten times faster than a Python step a token."""
    low = text.lower()
    out: list[str] = []
    start = 0
    while start < len(low):
        end = start + _ASCII_PIECE
        if end < len(low):  # cut where no token is: at the first separator from there on
            gap = _ASCII_GAP.search(low, end)
            end = gap.start() if gap else len(low)
        out += _ASCII_TOKEN.findall(low, start, end)
        start = end
    return out


def tokenize(text: str) -> list[str]:
    """The search terms of ``text``, in order; repeated terms are kept (they are term frequency)."""
    if text.isascii():
        return _ascii_tokens(text)
    out: list[str] = []
    # finditer, not findall: findall is one call that holds the GIL for the whole text (150 ms for two
    # million characters, the event loop waiting all along when this runs on a worker thread).
    for match in _tokens().finditer(unicodedata.normalize("NFKC", text)):
        cjk, word = match.groups()
        for letters in _letter_runs(cjk) if cjk else ():
            out.extend(letters)
            out.extend(letters[i : i + 2] for i in range(len(letters) - 1))
        if word:
            out.append(_fold(word))
    return out


def body(content: str, tags: Iterable[str] = ()) -> str:
    """The normalised text FTS5 indexes for an item: its terms (content, then tags) joined by spaces."""
    return " ".join(tokenize(" ".join([content, *tags])))


def query_terms(query: str) -> list[str]:
    """Distinct terms of a query, first occurrence first (a repeated word does not count twice)."""
    return list(dict.fromkeys(tokenize(query)))


def match_expression(terms: Iterable[str]) -> str:
    """An FTS5 MATCH expression: each term quoted (so no query text is FTS5 syntax), joined by OR."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


@functools.lru_cache(maxsize=64)
def _words_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern finding any of ``words`` whole (not inside a longer word), longest first: one pass over a
    text instead of one per word. (Plain alternatives: with a group each, ``re`` tries them ~25x slower.)"""
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"\b(?:{alternatives})\b", re.IGNORECASE)


@functools.lru_cache(maxsize=64)
def _split(
    terms: tuple[str, ...],
) -> tuple[tuple[str, ...], dict[str, str], tuple[tuple[str, re.Pattern[str]], ...], bool]:
    """``terms`` as words (and each lower-cased to itself), CJK terms' patterns, and whether the words may be
    found by ``_ascii_hits``: worked out once per query, not per hit."""
    cjk = tuple(t for t in terms if any(is_cjk(c) for c in t))
    words = tuple(t for t in terms if t not in cjk)
    plain = len(words) <= _ASCII_FIND_WORDS and all(w.isascii() and w.isalnum() for w in words)
    return words, {w.lower(): w for w in words}, tuple((t, re.compile(re.escape(t), re.IGNORECASE)) for t in cjk), plain


#: Up to this many words, ``_ascii_hits`` looks for each with ``str.find`` (a query's few words: ~9x faster
#: than the pattern); more would each scan the text again, where the pattern scans it once.
_ASCII_FIND_WORDS = 8


def _ascii_hits(content: str, lowered: dict[str, str], hits: list[tuple[int, str]]) -> None:
    """``_words_pattern``'s hits in ASCII ``content`` for ASCII letter-and-digit words, found with
    ``str.find``. The same hits: such a word matches ``\\b...\\b`` only as a whole run of word
    characters (``[A-Za-z0-9_]`` in ASCII text), so matches never overlap, and case-insensitive equality
    on ASCII is ``lower()`` equality; each word's first 51 places, as there."""
    low = content.lower()  # ASCII: same length, same positions
    end = len(low)
    for key, term in lowered.items():
        size, found = len(key), 0
        pos = low.find(key)
        while pos >= 0 and found <= 50:
            after = pos + size
            if (pos == 0 or not _is_word(low[pos - 1])) and (after == end or not _is_word(low[after])):
                hits.append((pos, term))
                found += 1
            pos = low.find(key, pos + 1)


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _hits(content: str, terms: tuple[str, ...]) -> list[tuple[int, str]]:
    """Where the terms occur in ``content`` (at most 51 places a term), in order. CJK terms match anywhere,
    each in a pass of its own (a character and the bigram it starts overlap)."""
    hits: list[tuple[int, str]] = []
    words, lowered, cjk, plain = _split(terms)
    found: dict[str, int] = {}
    if words and plain and content.isascii():
        _ascii_hits(content, lowered, hits)
    elif words:
        for m in _words_pattern(words).finditer(content):
            term = lowered.get(m.group().lower(), m.group())
            if (n := found.get(term, 0)) <= 50:
                found[term] = n + 1
                hits.append((m.start(), term))
    for term, pattern in cjk:
        for n, m in enumerate(pattern.finditer(content)):
            hits.append((m.start(), term))
            if n >= 50:
                break
    hits.sort()
    return hits


def snippet(content: str, terms: Iterable[str], width: int = SNIPPET_CHARS, scan: int | None = None) -> str:
    """The ``width``-character window of ``content`` holding the most distinct query terms.

    Found on the original text (not the normalised body), so what is shown is what was stored;
    a term we cannot locate verbatim (say, after NFKC folding) just does not steer the window.
    ``scan``: look for the terms in the first ``scan`` characters only (a recall bounds its work).
    """
    hits = _hits(content if scan is None else content[:scan], tuple(dict.fromkeys(terms)))
    start = best = 0
    inside: dict[str, int] = {}  # the terms of the hits from this one up to ``right`` (a sliding window)
    right = 0
    for pos, term in hits:
        while right < len(hits) and hits[right][0] < pos + width - 20:
            inside[hits[right][1]] = inside.get(hits[right][1], 0) + 1
            right += 1
        if len(inside) > best:
            best, start = len(inside), pos
        if (left := inside[term] - 1) == 0:
            del inside[term]
        else:
            inside[term] = left
    if start:
        start = max(0, start - 20)
        space = content.rfind(" ", max(0, start - 20), start + 1)
        start = space + 1 if space > 0 else start
    end = min(len(content), start + width)
    text = " ".join(content[start:end].split())
    return ("…" if start > 0 else "") + text + ("…" if end < len(content) else "")
