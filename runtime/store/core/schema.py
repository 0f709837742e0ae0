"""The store's tables described once, and rendered as each backend's DDL.

A schema change is a ``Table``, an ``Index``, an ``AddColumn`` or, where the dialects really differ (a
data move only SQLite's history needs, PostgreSQL's keyword index), ``Raw`` SQL per dialect. A ``Step``
is one named migration made of changes; each backend's list of steps (``runtime/store/core/tables``)
is rendered to ``Migration``s by ``render``. Migration names are released history on each backend:
the two lists may name the same change differently (PostgreSQL came later and folded SQLite's first
steps together), but each change is written once.

Columns take neutral types, rendered per dialect:

- ``ID``: identifiers and URIs, ``COLLATE "C"`` on PostgreSQL: prefix searches are ranges (``id >= lo
  AND id < hi``) that are only right, and only use the index, under byte order (a database created
  with a linguistic collation would sort them otherwise);
- ``TEXT``, ``JSON`` (JSON text: jsonb would reorder its keys), ``INT``, ``FLAG`` (0/1), ``BIG``
  (64-bit on PostgreSQL; SQLite's INTEGER is already), ``FLOAT`` (seconds since the epoch: REAL /
  DOUBLE PRECISION), ``BYTES`` (BLOB / BYTEA);
- ``SERIAL``: a row number the database assigns (SQLite's rowid, an identity on PostgreSQL), and
  ``COUNTER``, one never reused (SQLite's AUTOINCREMENT).

``Table(..., without_rowid=True)`` is a clustered table on SQLite (rows stored in key order); PostgreSQL
has no such choice and ignores it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runtime.store.core.dialect import Dialect
from runtime.store.migration import Migration

#: Neutral column type -> (SQLite, PostgreSQL).
TYPES: dict[str, tuple[str, str]] = {
    "id": ("TEXT", 'TEXT COLLATE "C"'),
    "text": ("TEXT", "TEXT"),
    "json": ("TEXT", "TEXT"),
    "int": ("INTEGER", "INTEGER"),
    "flag": ("INTEGER", "INTEGER"),
    "big": ("INTEGER", "BIGINT"),
    "float": ("REAL", "DOUBLE PRECISION"),
    "bytes": ("BLOB", "BYTEA"),
    "serial": ("INTEGER PRIMARY KEY", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
    "counter": ("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
}
ID, TEXT, JSON, INT, FLAG, BIG, FLOAT, BYTES, SERIAL, COUNTER = TYPES  # the names, in the order above


def _pg(d: Dialect) -> bool:
    return d.name == "postgresql"


@dataclass(frozen=True)
class Col:
    """A column: NOT NULL unless ``null``; ``ref`` a ``table(column)`` it references."""

    name: str
    type: str
    null: bool = False
    default: int | None = None
    ref: str | None = None
    unique: bool = False

    def ddl(self, d: Dialect, key: bool = False) -> str:
        out = f"{self.name} {TYPES[self.type][_pg(d)]}"
        if key:
            out += " PRIMARY KEY"
        elif not self.null and self.type not in (SERIAL, COUNTER):
            out += " NOT NULL"
        if self.unique:
            out += " UNIQUE"
        if self.default is not None:
            out += f" DEFAULT {self.default}"
        return out + (f" REFERENCES {self.ref}" if self.ref else "")


@dataclass(frozen=True)
class Table:
    """A table: its columns in order, its primary ``key`` (one column: declared on it), UNIQUE column sets."""

    name: str
    columns: Sequence[Col]
    key: Sequence[str] = ()
    unique: Sequence[Sequence[str]] = ()
    without_rowid: bool = False

    def ddl(self, d: Dialect) -> str:
        inline = self.key[0] if len(self.key) == 1 else None
        lines = [c.ddl(d, key=c.name == inline) for c in self.columns]
        if len(self.key) > 1:
            lines.append(f"PRIMARY KEY ({', '.join(self.key)})")
        lines += [f"UNIQUE ({', '.join(cols)})" for cols in self.unique]
        body = ",\n    ".join(lines)
        return (
            f"CREATE TABLE {self.name} (\n    {body}\n){' WITHOUT ROWID' if self.without_rowid and not _pg(d) else ''}"
        )


@dataclass(frozen=True)
class Index:
    """An index on ``columns`` (as SQL writes them: ``"status, priority DESC"``), partial with ``where``."""

    name: str
    table: str
    columns: str
    unique: bool = False
    where: str | None = None

    def ddl(self, d: Dialect) -> str:
        kind = "UNIQUE INDEX" if self.unique else "INDEX"
        return f"CREATE {kind} {self.name} ON {self.table} ({self.columns})" + (
            f" WHERE {self.where}" if self.where else ""
        )


@dataclass(frozen=True)
class AddColumn:
    table: str
    column: Col

    def ddl(self, d: Dialect) -> str:
        return f"ALTER TABLE {self.table} ADD COLUMN {self.column.ddl(d)}"


@dataclass(frozen=True)
class Raw:
    """SQL one dialect needs and the other does not (or spells too differently to describe)."""

    sqlite: str = ""
    postgres: str = ""

    def ddl(self, d: Dialect) -> str:
        return (self.postgres if _pg(d) else self.sqlite).strip().rstrip(";")


Change = Table | Index | AddColumn | Raw


class Step:
    """One named migration: its changes, in order."""

    def __init__(self, name: str, *changes: Change) -> None:
        self.name, self.changes = name, changes


def render(d: Dialect, steps: Sequence[Step], extra: Mapping[str, str] | None = None) -> list[Migration]:
    """``steps`` as ``d``'s migrations; ``extra``: SQL of the backend's own appended to the step of that name."""
    out = []
    for step in steps:
        sql = ";\n".join(s for s in (c.ddl(d) for c in step.changes) if s) + ";\n"
        out.append(Migration(step.name, sql + (extra or {}).get(step.name, "")))
    return out
