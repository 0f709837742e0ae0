"""Drives the store core's operations (``runtime.store.core``) on SQLite: synchronously, inside the
transaction ``SQLiteDatabase`` opens on its writer thread, a reader, or the event loop's connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from runtime.store.core import Duplicate, Failed, Op, Stmt
from runtime.store.core.dialect import SQLITE, Dialect
from runtime.store.core.statements import resume
from runtime.store.sqlite.database import SQLiteDatabase

T = TypeVar("T")


def drive(conn: sqlite3.Connection, op: Op[T]) -> T:
    """Run ``op`` to its end on ``conn``: each statement it yields is executed and its outcome sent back."""
    try:
        stmt = next(op)
        while True:
            stmt = resume(op, *_outcome(conn, stmt))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _outcome(conn: sqlite3.Connection, stmt: Stmt) -> tuple[Any, Failed | None]:
    """The statement's result, or the error the operation is thrown (``Failed``)."""
    try:
        return _execute(conn, stmt), None
    except sqlite3.Error as exc:
        key = isinstance(exc, sqlite3.IntegrityError) and ("UNIQUE" in str(exc) or "PRIMARY KEY" in str(exc))
        return None, Duplicate(exc) if key else Failed(exc)


def _execute(conn: sqlite3.Connection, stmt: Stmt) -> Any:
    if stmt.fetch == "many":
        conn.executemany(stmt.sql, stmt.args)
        return None
    if stmt.fetch == "notify":  # nobody to tell: other processes' runtimes poll
        return None
    if stmt.fetch == "tuples":  # a sqlite3.Row per row costs more than reading it
        plain = conn.cursor()
        plain.row_factory = None
        return plain.execute(stmt.sql, stmt.args).fetchall()
    cursor = conn.execute(stmt.sql, stmt.args)
    if stmt.fetch == "none":
        return cursor.rowcount
    if stmt.fetch == "all":
        return cursor.fetchall()
    row = cursor.fetchone()
    if stmt.fetch == "one":
        return row
    return None if row is None else row[0]


class SQLiteExecutor:
    """The core's ``Executor`` on a ``SQLiteDatabase`` (its write batching and inline commits unchanged)."""

    dialect: Dialect = SQLITE

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    async def read(self, make: Callable[..., Op[T]], *args: Any, **kwargs: Any) -> T:
        return await self.db.read(lambda conn: drive(conn, make(SQLITE, *args, **kwargs)))

    async def write(self, make: Callable[..., Op[T]], *args: Any, small: bool = False, **kwargs: Any) -> T:
        return await self.db.write(lambda conn: drive(conn, make(SQLITE, *args, **kwargs)), small=small)

    async def lookup(self, make: Callable[..., Op[T]], *args: Any, **kwargs: Any) -> T:
        return await self.db.lookup(lambda conn: drive(conn, make(SQLITE, *args, **kwargs)))

    def refusal(self) -> BaseException | None:
        return self.db.refusal()
