"""Tokenization: what the index and every query (and the rank-bm25 oracle) see."""

from __future__ import annotations

import sqlite3

from runtime.memory.text import body, match_expression, query_terms, snippet, tokenize


def test_latin_words_are_folded_like_unicode61() -> None:
    assert tokenize("Hello, Wörld! café_au_lait x²") == ["hello", "world", "cafe", "au", "lait", "x2"]


def test_cjk_runs_become_characters_and_bigrams() -> None:
    assert tokenize("机器学习") == ["机", "器", "学", "习", "机器", "器学", "学习"]
    assert tokenize("用Python做") == ["用", "python", "做"]
    assert tokenize("ﾗｰﾒﾝ") == tokenize("ラーメン")  # half-width katakana is NFKC-folded
    assert "東京" in tokenize("東京でラーメン") and "ラー" in tokenize("東京でラーメン")
    assert tokenize("ジョン・スミス")[:3] == ["ジ", "ョ", "ン"] and "ン・" not in tokenize("ジョン・スミス")
    assert "ขา" in tokenize("ข้าวผัด")  # Thai: marks dropped, letters n-grammed


def test_query_terms_are_distinct_in_first_order() -> None:
    assert query_terms("b a b A") == ["b", "a"]


def test_fts5_tokenizes_the_body_into_exactly_our_tokens() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    text = "Grüße aus 東京! ＡＢＣ-123 用户喜欢机器学习 ４２ O'Brien ジョン・スミス ผมชอบกินข้าวผัด๏ ၿမန္မာ ភាសាខ្មែរ"
    conn.execute("INSERT INTO t (rowid, body) VALUES (1, ?)", (body(text),))
    indexed = [row[0] for row in conn.execute("SELECT term FROM v ORDER BY offset")]
    assert indexed == tokenize(text)


def test_match_expression_quotes_every_term() -> None:
    assert match_expression(["a", 'b"c']) == '"a" OR "b""c"'


def test_snippet_short_text_is_whole_and_long_text_is_windowed() -> None:
    assert snippet("short text", ["text"]) == "short text"
    long = "x " * 300 + "needle here " + "y " * 300
    cut = snippet(long, ["needle"])
    assert "needle here" in cut and cut.startswith("…") and cut.endswith("…")
