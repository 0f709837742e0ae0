"""What an operation yields (``Stmt``), what drives it (``Executor``), and the stores whose methods are
operations (``Store``, ``Scoped``: a method is one line, ``get = scoped(run_reads.get)``, typed as the
operation is); see the package docstring."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, Literal, ParamSpec, Protocol, TypeAlias, TypeVar

from runtime.store.core.dialect import Dialect

T = TypeVar("T")
P = ParamSpec("P")
Sc = TypeVar("Sc", covariant=True)

Fetch = Literal["none", "one", "all", "tuples", "value", "many", "notify"]

#: A row as both drivers give it: ``row["column"]`` and ``row[0]`` work on sqlite3.Row and asyncpg.Record.
Row: TypeAlias = Any

#: An operation: yields statements, is sent each one's result, returns its own result.
Op: TypeAlias = Generator["Stmt", Any, T]


@dataclass(frozen=True, slots=True)
class Stmt:
    """One SQL statement: ``?`` placeholders, the arguments, and what its driver sends back.

    ``fetch``: ``none`` (nothing; the statement's row count for an UPDATE/DELETE), ``one`` (a row or
    None), ``all`` (a list of rows), ``value`` (the first column of the first row, or None),
    ``many`` (``args`` is a sequence of argument tuples, run as one executemany; sends None),
    ``tuples`` (as ``all``, the rows as plain tuples where a driver makes named rows at a cost: a long read),
    ``notify`` (``sql`` is a channel, ``args`` its one payload: sent to other processes once the write
    commits, where the dialect ``notifies``; sends None).
    """

    sql: str
    args: Sequence[Any] = ()
    fetch: Fetch = "none"


class Failed(Exception):
    """The database refused a statement: thrown into the operation by its driver at the ``yield``, with
    the driver's own error as ``error``. An operation that does not catch it fails with that error.

    After it an operation may raise, return, or roll back to a savepoint it made, never run another
    statement: on PostgreSQL the failed statement has aborted the transaction (up to that savepoint)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class Duplicate(Failed):
    """A unique or primary-key constraint refused the statement. To go on past an existing key, insert
    with the dialect's ``insert_ignore``/``on_conflict_ignore`` instead."""


# Small constructors, so an operation reads as what it asks for: ``row = yield one("SELECT …", id)``.
def none(sql: str, *args: Any) -> Stmt:
    return Stmt(sql, args, "none")


def one(sql: str, *args: Any) -> Stmt:
    return Stmt(sql, args, "one")


def rows(sql: str, *args: Any) -> Stmt:
    return Stmt(sql, args, "all")


def tuples(sql: str, *args: Any) -> Stmt:
    return Stmt(sql, args, "tuples")


def value(sql: str, *args: Any) -> Stmt:
    return Stmt(sql, args, "value")


def many(sql: str, arg_rows: Iterable[Sequence[Any]]) -> Stmt:
    return Stmt(sql, list(arg_rows), "many")


def notice(channel: str, payload: str) -> Stmt:
    return Stmt(channel, (payload,), "notify")


def resume(op: Op[T], result: Any, error: Failed | None = None) -> Stmt:
    """What a driver does with a statement's outcome: sends ``op`` the ``result`` (or throws in its
    ``error``) and returns its next statement; ``StopIteration`` carries the operation's result at its
    end. A ``Failed`` the operation does not catch ends it with the driver's own error."""
    try:
        return op.send(result) if error is None else op.throw(error)
    except Failed as failed:
        raise failed.error from None


class Executor(Protocol):
    """How a backend runs an operation: the transaction, connection and thread are its own.

    ``make`` is called with the backend's dialect and ``args`` for every attempt (a backend may run
    an operation again when its connection is lost before the commit), so it must be the operation's
    function, not a generator already started.
    """

    @property
    def dialect(self) -> Any: ...

    async def read(self, make: Callable[..., Op[T]], *args: Any, **kwargs: Any) -> T:
        """Run in one consistent read snapshot."""

    async def write(self, make: Callable[..., Op[T]], *args: Any, small: bool = False, **kwargs: Any) -> T:
        """Run in a write transaction; return once committed. ``small``: a write a backend may commit inline."""

    async def lookup(self, make: Callable[..., Op[T]], *args: Any, **kwargs: Any) -> T:
        """A point read by key: where the backend can, on the event loop's own connection (no hop)."""

    def refusal(self) -> BaseException | None:
        """Why writes are refused now (a damaged or vanished file), or None: readiness reports it."""


#: How a store method runs its operation: ``Executor.read``, ``write``, ``write`` with ``small``, ``lookup``.
How = Literal["read", "write", "small", "lookup"]


class Store:
    """A store on a backend's ``Executor``, its methods the operations it runs (``unscoped``)."""

    def __init__(self, ex: Executor) -> None:
        self.ex = ex


class Scoped(Store, Generic[Sc]):
    """A store of one ``scope`` (a tenant/project; a run queue's may be every one), passed to each
    operation its methods run before their own arguments (``scoped``)."""

    def __init__(self, ex: Executor, scope: Sc) -> None:
        super().__init__(ex)
        self.scope = scope


def _run(ex: Executor, how: How, make: Callable[..., Op[T]], *args: Any, **kwargs: Any) -> Awaitable[T]:
    if how == "read":
        return ex.read(make, *args, **kwargs)
    if how == "lookup":
        return ex.lookup(make, *args, **kwargs)
    return ex.write(make, *args, small=how == "small", **kwargs)


def unscoped(
    op: Callable[Concatenate[Dialect, P], Op[T]], how: How = "read"
) -> Callable[Concatenate[Store, P], Coroutine[Any, Any, T]]:
    """A ``Store`` method running ``op`` as ``how`` says on the method's own arguments."""

    async def method(self: Store, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await _run(self.ex, how, op, *args, **kwargs)

    return method


def scoped(
    op: Callable[Concatenate[Dialect, Sc, P], Op[T]], how: How = "read"
) -> Callable[Concatenate[Scoped[Sc], P], Coroutine[Any, Any, T]]:
    """A ``Scoped`` method running ``op`` as ``how`` says on the store's scope and the method's arguments."""

    async def method(self: Scoped[Sc], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await _run(self.ex, how, op, self.scope, *args, **kwargs)

    return method
