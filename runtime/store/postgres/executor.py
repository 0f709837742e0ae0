"""Drives the store core's operations (``runtime.store.core``) on PostgreSQL: with ``await`` on an
asyncpg connection, inside the transaction ``PostgresDatabase`` opens (and re-runs after a lost
connection). The core's ``?`` placeholders become ``$1, $2, …`` here, once per distinct statement."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import asyncpg

from runtime.store.core import Duplicate, Failed, Op, Stmt
from runtime.store.core.dialect import POSTGRES, Dialect
from runtime.store.core.statements import resume
from runtime.store.postgres.database import PostgresDatabase
from runtime.store.postgres.notify import notify

T = TypeVar("T")


@functools.lru_cache(maxsize=4096)
def numbered(sql: str) -> str:
    """``?`` placeholders as PostgreSQL's ``$n`` (the core writes no ``?`` inside a string literal)."""
    first, *rest = sql.split("?")
    return first + "".join(f"${n}{part}" for n, part in enumerate(rest, start=1))


async def drive(conn: asyncpg.Connection, op: Op[T]) -> T:
    """Run ``op`` to its end on ``conn``: each statement it yields is executed and its outcome sent back."""
    try:
        stmt = next(op)
        while True:
            stmt = resume(op, *await _outcome(conn, stmt))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def _outcome(conn: asyncpg.Connection, stmt: Stmt) -> tuple[Any, Failed | None]:
    """The statement's result, or the error the operation is thrown (``Failed``)."""
    try:
        return await _execute(conn, stmt), None
    except asyncpg.PostgresError as exc:
        return None, Duplicate(exc) if isinstance(exc, asyncpg.UniqueViolationError) else Failed(exc)


class _Several(Exception):
    """An operation read as one statement (``drive_one``) asked for a second."""


async def drive_one(conn: asyncpg.Connection, op: Op[T]) -> T:
    """Run ``op`` if it runs at most one statement; ``_Several`` (nothing more run) if it asks for a second."""
    try:
        result = await _execute(conn, next(op))
        op.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    op.close()
    raise _Several


async def _execute(conn: asyncpg.Connection, stmt: Stmt) -> Any:
    if stmt.fetch == "notify":
        await notify(conn, stmt.sql, *stmt.args)  # held, and sent once the write commits (notify.py)
        return None
    sql = numbered(stmt.sql)
    if stmt.fetch == "many":
        await conn.executemany(sql, stmt.args)
        return None
    if stmt.fetch == "none":
        status: str = await conn.execute(sql, *stmt.args)
        last = status.rsplit(" ", 1)[-1]  # "UPDATE 3", "INSERT 0 1": the row count is the last word
        return int(last) if last.isdigit() else 0
    if stmt.fetch == "all" or stmt.fetch == "tuples":
        return await conn.fetch(sql, *stmt.args)
    if stmt.fetch == "one":
        return await conn.fetchrow(sql, *stmt.args)
    return await conn.fetchval(sql, *stmt.args)


class PostgresExecutor:
    """The core's ``Executor`` on a ``PostgresDatabase`` (its group commit and outage handling unchanged)."""

    dialect: Dialect = POSTGRES

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    async def read(self, make: Callable[..., Op[T]], *args: Any, **kwargs: Any) -> T:
        """One consistent snapshot. Most reads are one statement, which is one by itself: each operation is
        first run so (one round trip, not three), and in a transaction from the first time it asks for a
        second statement on (that attempt, read-only, is dropped and the read made again)."""
        several = self.db.several_reads
        if make not in several:
            try:
                return await self.db.read(lambda conn: drive_one(conn, make(POSTGRES, *args, **kwargs)), alone=True)
            except _Several:
                several.add(make)
        return await self.db.read(lambda conn: drive(conn, make(POSTGRES, *args, **kwargs)))

    async def write(self, make: Callable[..., Op[T]], *args: Any, small: bool = False, **kwargs: Any) -> T:
        return await self.db.write(lambda conn: drive(conn, make(POSTGRES, *args, **kwargs)))

    async def lookup(self, make: Callable[..., Op[T]], *args: Any, **kwargs: Any) -> T:
        return await self.read(make, *args, **kwargs)

    def refusal(self) -> BaseException | None:
        return None  # the server refuses what it refuses per statement; nothing is refused ahead of it
