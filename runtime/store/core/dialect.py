"""The SQL that differs between SQLite and PostgreSQL, asked for by name instead of branching on a backend.

Each backend makes one ``Dialect`` (``runtime/store/sqlite/executor.py``,
``runtime/store/postgres/executor.py``); an operation takes it as its first argument. Add a field
here (SQLite's value as its default, PostgreSQL's in ``POSTGRES``) when an operation needs a fragment
the dialects spell differently: that is the one line a new operation costs beyond its own function.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Dialect:
    """The fragments, each with SQLite's value as its default (``SQLITE`` is ``Dialect("sqlite")``):
    PostgreSQL's are in ``POSTGRES`` below."""

    name: str
    #: appended to a SELECT that claims rows another worker must skip ("" where writers are serialized)
    skip_locked: str = ""
    #: ``skip_locked`` for a SELECT from ``runs`` joined with rows that are not to be locked
    skip_locked_runs: str = ""
    #: appended to a SELECT whose rows the transaction goes on to change ("" where writers are serialized)
    for_update: str = ""
    #: an INSERT that does nothing when its key exists:
    #: ``{insert_ignore} INTO t (...) VALUES (...){on_conflict_ignore}``
    insert_ignore: str = "INSERT OR IGNORE"
    on_conflict_ignore: str = ""
    #: whether ``INDEXED BY name`` may pin a query's index (SQLite's planner misjudges a few of them)
    index_hints: bool = True
    #: a statement taking a lock on a (text, bigint) key until the transaction ends, so two writers of
    #: one key queue ("" where writers are serialized anyway)
    xact_lock: str = ""
    #: whether a list binds as one array parameter (PostgreSQL: a set of rows is one statement over ``unnest``)
    arrays: bool = False
    #: whether a small point read runs in place on the event loop (``Executor.lookup``; SQLite): worth a
    #: cheap size check first. Elsewhere a lookup is a read like any other, so no check is made.
    point_reads: bool = True
    #: whether a write tells other processes what it changed (``statements.notice``, sent once it commits:
    #: PostgreSQL's NOTIFY); where it cannot, their runtimes poll
    notifies: bool = False
    #: the stamp of a vector written now, and (a SELECT) the horizon a reader asks from next time:
    #: every vector it has not seen is stamped at or after it (``runtime.store.core.vectors``)
    stamp_next: str = "(SELECT coalesce(max(stamp), 0) + 1 FROM memory_vectors)"
    stamp_horizon: str = "SELECT coalesce(max(stamp), 0) + 1 FROM memory_vectors"

    def indexed_by(self, index: str) -> str:
        """`` INDEXED BY index`` where the dialect has it, else nothing (PostgreSQL plans for itself)."""
        return f" INDEXED BY {index}" if self.index_hints else ""

    def in_list(self, values: Sequence[Any], sql_type: str = "text") -> tuple[str, tuple[Any, ...]]:
        """`` IN (?, …)`` over ``values``, or `` = ANY(?::type[])`` binding them as one array where lists bind."""
        if self.arrays:
            return f" = ANY(?::{sql_type}[])", (list(values),)
        return f" IN ({', '.join('?' * len(values))})", tuple(values)

    def each(self) -> str:
        """A SELECT of the ids in one list parameter (bound as ``listed(ids)``), however long the list:
        JSON text on SQLite, an array on PostgreSQL (in the ``"C"`` collation of its id columns)."""
        return 'SELECT unnest(?::text[]) COLLATE "C" AS value' if self.arrays else "SELECT value FROM json_each(?)"

    def listed(self, values: Sequence[Any]) -> Any:
        """``values`` as the one parameter ``each()`` reads."""
        return list(values) if self.arrays else json.dumps(list(values))

    def table(
        self, alias: str, columns: dict[str, str], values: Sequence[Sequence[Any]]
    ) -> tuple[str, tuple[Any, ...]]:
        """``values``, rows of ``columns`` (name -> PostgreSQL type), as a table ``alias`` for a FROM clause, and
        its parameters: an array per column where lists bind, else the rows as one JSON list."""
        names = ", ".join(columns)
        if self.arrays:
            arrays = ", ".join(f"?::{kind}[]" for kind in columns.values())
            return f"unnest({arrays}) AS {alias}({names})", tuple(list(column) for column in zip(*values, strict=True))
        picks = ", ".join(f"json_extract(value, '$[{i}]') AS {name}" for i, name in enumerate(columns))
        return f"(SELECT {picks} FROM json_each(?)) AS {alias}", (json.dumps([list(v) for v in values]),)

    def array_of(self, select: str, column: str) -> str:
        """An expression: ``select``'s one ``column``, its rows in order, as a list (read back with ``unlist``)."""
        return f"ARRAY({select})" if self.arrays else f"(SELECT json_group_array({column}) FROM ({select}))"

    def unlist(self, value: Any) -> list[Any]:
        return list(value) if self.arrays else json.loads(value)


SQLITE = Dialect("sqlite")

POSTGRES = Dialect(
    name="postgresql",
    skip_locked=" FOR UPDATE SKIP LOCKED",
    skip_locked_runs=" FOR UPDATE OF runs SKIP LOCKED",
    for_update=" FOR UPDATE",
    insert_ignore="INSERT",
    on_conflict_ignore=" ON CONFLICT DO NOTHING",
    index_hints=False,
    point_reads=False,
    notifies=True,
    xact_lock="SELECT pg_advisory_xact_lock(hashtextextended(?, ?))",
    arrays=True,
    stamp_next="pg_current_xact_id()::text::bigint",
    stamp_horizon="SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint",
)
