"""The store's tables described once, and rendered as each backend's DDL.

A schema change is a ``Table``, an ``Index``, an ``AddColumn`` or, where the dialects really differ (a
data move only SQLite's history needs), ``Raw`` SQL per dialect. A ``Step`` is one named migration made
of changes; each backend's list of steps (``runtime/store/core/tables``) is rendered to ``Migration``s
by ``render``. Migration names are released history on each backend: the two lists may name the same
change differently (PostgreSQL came later and folded SQLite's first steps together), but each change
is written once.

A table's columns are written one a line, ``name type [null] [unique] [key] [default N] [references
table(column)]`` (``table()``; NOT NULL unless ``null``; the columns marked ``key`` make the primary
key), with neutral types rendered per dialect:

- ``id``: identifiers and URIs, ``COLLATE "C"`` on PostgreSQL: prefix searches are ranges (``id >= lo
  AND id < hi``) that are only right, and only use the index, under byte order (a database created
  with a linguistic collation would sort them otherwise);
- ``text``, ``json`` (JSON text: jsonb would reorder its keys), ``int``, ``flag`` (0/1), ``big``
  (64-bit on PostgreSQL; SQLite's INTEGER is already), ``float`` (seconds since the epoch: REAL /
  DOUBLE PRECISION), ``bytes`` (BLOB / BYTEA);
- ``serial``: a row number the database assigns, the table's key (SQLite's rowid, an identity on
  PostgreSQL), and ``counter``, one never reused (SQLite's AUTOINCREMENT).

``without_rowid=True`` makes a clustered table on SQLite (rows stored in key order); PostgreSQL has no
such choice and ignores it.
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
SERIAL, COUNTER = "serial", "counter"  # declare their own key


def _pg(d: Dialect) -> bool:
    return d.name == "postgresql"


@dataclass(frozen=True)
class Col:
    """A column: NOT NULL unless ``null``; ``ref`` a ``table(column)`` it references; ``key``: in the primary key."""

    name: str
    type: str
    null: bool = False
    default: int | None = None
    ref: str | None = None
    unique: bool = False
    key: bool = False

    @classmethod
    def parse(cls, spec: str) -> Col:
        """``name type [null] [unique] [key] [default N] [references table(column)]``."""
        name, kind, *rest = spec.split()
        if kind not in TYPES:
            raise ValueError(f"column {spec.strip()!r}: type {kind!r} is none of {', '.join(TYPES)}")
        flags = {"null": False, "unique": False, "key": False}
        default, ref, words = None, None, iter(rest)
        for word in words:
            if word in flags:
                flags[word] = True
            elif word == "default":
                default = int(next(words))
            elif word == "references":
                ref = next(words)
            else:
                raise ValueError(f"column {spec.strip()!r}: {word!r} is not null, unique, key, default N or references")
        return cls(name, kind, default=default, ref=ref, **flags)

    def ddl(self, d: Dialect, inline_key: bool = False) -> str:
        out = f"{self.name} {TYPES[self.type][_pg(d)]}"
        if inline_key:
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
    """A table: its columns in order (those marked ``key`` make its primary key), UNIQUE column sets."""

    name: str
    columns: Sequence[Col]
    unique: Sequence[Sequence[str]] = ()
    without_rowid: bool = False

    def ddl(self, d: Dialect) -> str:
        key = [c.name for c in self.columns if c.key]
        lines = [c.ddl(d, inline_key=len(key) == 1 and c.key) for c in self.columns]
        if len(key) > 1:
            lines.append(f"PRIMARY KEY ({', '.join(key)})")
        lines += [f"UNIQUE ({', '.join(cols)})" for cols in self.unique]
        body = ",\n    ".join(lines)
        clustered = " WITHOUT ROWID" if self.without_rowid and not _pg(d) else ""
        return f"CREATE TABLE {self.name} (\n    {body}\n){clustered}"


def table(name: str, columns: str, *, unique: Sequence[Sequence[str]] = (), without_rowid: bool = False) -> Table:
    """A ``Table`` from its columns written one a line, as ``Col.parse`` reads them."""
    cols = [Col.parse(line) for line in columns.splitlines() if line.strip()]
    return Table(name, cols, unique, without_rowid)


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


class AddColumn:
    """A column added to ``table``, written as ``Col.parse`` reads it."""

    def __init__(self, table: str, column: str) -> None:
        self.table, self.column = table, Col.parse(column)

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
