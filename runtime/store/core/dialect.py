"""The SQL that differs between SQLite and PostgreSQL, asked for by name instead of branching on a backend.

Each backend makes one ``Dialect`` (``runtime/store/sqlite/executor.py``,
``runtime/store/postgres/executor.py``); an operation takes it as its first argument. Add a field
here (with both backends' values) when an operation needs a fragment the dialects spell differently:
that is the one line a new operation costs beyond its own function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    #: appended to a SELECT that claims rows another worker must skip ("" where writers are serialized)
    skip_locked: str
    #: appended to a SELECT whose rows the transaction goes on to change ("" where writers are serialized)
    for_update: str
    #: an INSERT that does nothing when its key exists:
    #: ``{insert_ignore} INTO t (...) VALUES (...){on_conflict_ignore}``
    insert_ignore: str
    on_conflict_ignore: str
    #: whether ``INDEXED BY name`` may pin a query's index (SQLite's planner misjudges a few of them)
    index_hints: bool
    #: whether a list binds as one array parameter (PostgreSQL: a set of rows is one statement over ``unnest``)
    arrays: bool = False

    def indexed_by(self, index: str) -> str:
        """`` INDEXED BY index`` where the dialect has it, else nothing (PostgreSQL plans for itself)."""
        return f" INDEXED BY {index}" if self.index_hints else ""

    def in_list(self, values: Sequence[Any], sql_type: str = "text") -> tuple[str, tuple[Any, ...]]:
        """`` IN (?, …)`` over ``values``, or `` = ANY(?::type[])`` binding them as one array where lists bind."""
        if self.arrays:
            return f" = ANY(?::{sql_type}[])", (list(values),)
        return f" IN ({', '.join('?' * len(values))})", tuple(values)


SQLITE = Dialect(
    name="sqlite",
    skip_locked="",
    for_update="",
    insert_ignore="INSERT OR IGNORE",
    on_conflict_ignore="",
    index_hints=True,
)

POSTGRES = Dialect(
    name="postgresql",
    skip_locked=" FOR UPDATE SKIP LOCKED",
    for_update=" FOR UPDATE",
    insert_ignore="INSERT",
    on_conflict_ignore=" ON CONFLICT DO NOTHING",
    index_hints=False,
    arrays=True,
)
