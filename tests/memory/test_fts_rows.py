"""The SQLite keyword index reads its item count (BM25's N) from FTS5's own averages record instead of
counting ``_docsize`` on every query: the two agree after committed inserts and deletes, past one- and
two-byte varints. (FTS5 writes the record when a transaction commits; a recall reads a committed snapshot.)"""

from __future__ import annotations

import sqlite3

from runtime.store.sqlite.recall import _rows


def test_the_averages_record_counts_what_docsize_counts() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)  # each statement commits, as a recall reads: committed rows
    db.execute("CREATE VIRTUAL TABLE memory_fts_1 USING fts5(body, tokenize='unicode61')")

    def both() -> tuple[int, int]:
        block = db.execute("SELECT block FROM memory_fts_1_data WHERE id = 1").fetchone()[0]
        return _rows(block), db.execute("SELECT count(*) FROM memory_fts_1_docsize").fetchone()[0]

    assert both() == (0, 0)  # a new index: an empty record
    db.executemany("INSERT INTO memory_fts_1 (rowid, body) VALUES (?, 'a b c')", [(i,) for i in range(1, 20_001)])
    assert both() == (20_000, 20_000)  # three varint bytes
    db.executemany("DELETE FROM memory_fts_1 WHERE rowid = ?", [(i,) for i in range(1, 20_001, 3)])
    assert both() == (13_333, 13_333)
    db.execute("DELETE FROM memory_fts_1 WHERE rowid > 130")
    assert both() == (86, 86)


def test_a_nine_byte_varint_carries_eight_bits_in_its_last_byte() -> None:
    assert _rows(bytes([0x81, 0x00])) == 128
    assert _rows(bytes([0xFF] * 8 + [0xFF])) == 2**64 - 1
    assert _rows(bytes([0x05, 0x81])) == 5  # the columns' totals after the count are not read
