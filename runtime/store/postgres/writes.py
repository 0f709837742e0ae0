"""The writes ``PostgresDatabase`` group-commits (``database.py``): what each one is, the units a batch
makes them in (one write alone, or the writes sharing a ``Merge`` together), and the tests of what a
failure means (the connection lost, a lock conflict, a COMMIT that failed after all)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anyio
import asyncpg

from runtime.store.postgres.faults import is_connection_lost

T = TypeVar("T")
Work = Callable[[asyncpg.Connection], Awaitable[T]]

LOCK_CONFLICTS = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure


def lock_conflict(exc: BaseException) -> bool:
    """True for the errors PostgreSQL raises to break a lock cycle: the write can simply be run again."""
    return getattr(exc, "sqlstate", None) in LOCK_CONFLICTS


#: Several writes of a batch as one unit of work: ``await merge(conn, payloads)`` gives, for each payload in
#: order, its result or the exception that is its own error (it then wrote nothing), and the transaction's
#: id when it learnt it (else None). Raising fails the unit as a whole: each of its writes is then made alone.
Merge = Callable[[asyncpg.Connection, list[Any]], Awaitable[tuple[list[Any], str | None]]]


@dataclass
class Write(Generic[T]):
    fn: Work[T]
    merge: Merge | None = None  # writes of one batch with the same ``merge`` are made together by it
    payload: Any = None  # what ``merge`` is given of this write
    result: Any = None
    error: BaseException | None = None
    taken: bool = False
    retry: bool = False  # lost a deadlock (or a serialization conflict) and was rolled back alone
    settled: anyio.Event = field(default_factory=anyio.Event)


def units(items: list[Write[Any]]) -> list[list[Write[Any]]]:
    """A batch's units of work, in order: each write alone, but the writes sharing a ``merge`` together
    (where the first of them stood)."""
    units: dict[Any, list[Write[Any]]] = {}
    for item in items:
        units.setdefault(id(item) if item.merge is None else item.merge, []).append(item)
    return list(units.values())


class Lost(Exception):
    """The connection went away before COMMIT reached the server: nothing was committed."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def gone(conn: asyncpg.Connection, exc: BaseException) -> bool:
    """True when ``exc`` (raised while using ``conn``) means the connection is lost. A pooled
    connection lost under us is detached from its proxy, which then refuses every call."""
    if is_connection_lost(exc):
        return True
    try:
        return bool(conn.is_closed())
    except asyncpg.InterfaceError:
        return True


async def run_unit(conn: asyncpg.Connection, unit: list[Write[Any]]) -> str | None:
    """Make one unit of a batch (``units``): one write by its ``fn``, or merged writes by their ``merge``;
    the transaction's id if the unit learnt it."""
    first = unit[0]
    if first.merge is None:
        first.result = await first.fn(conn)
        return None
    outcomes, xid = await first.merge(conn, [item.payload for item in unit])
    for item, outcome in zip(unit, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            item.error = outcome
        else:
            item.result = outcome
    return xid


async def committed(conn: asyncpg.Connection, xid: str | None) -> bool:
    """After an error from ``COMMIT`` and the notifications sent with it: whether the transaction committed
    (then only the notifications failed). Still in the transaction: the COMMIT never ran."""
    if conn.is_in_transaction():
        return False
    if xid is None:
        return True  # it had written nothing
    status: str | None = await conn.fetchval("SELECT pg_xact_status($1::text::xid8)", xid)
    return status == "committed"
