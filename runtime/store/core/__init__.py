"""The store core: each store operation's rules and SQL, written once for both backends.

An operation is a *sans-IO* generator (``statements.Op``): it yields ``Stmt`` values (SQL with
``?`` placeholders, its arguments, and what to fetch) and is sent back each statement's result.
It never touches a connection, a thread or an event loop, so the same code runs

- on SQLite, driven synchronously inside the writer thread's (or the loop's) transaction
  (``runtime/store/sqlite/executor.py``), and
- on PostgreSQL, driven with ``await`` on an asyncpg connection inside its transaction
  (``runtime/store/postgres/executor.py``), which also rewrites ``?`` to ``$1, $2, …``.

Where the two SQL dialects really differ (locking clauses, upserts, full-text search) an operation
asks its ``Dialect`` (``dialect.py``) for the fragment instead of branching on a backend's name.
A statement the database refuses reaches the operation as ``Failed`` (``Duplicate`` for a duplicate key),
thrown into it at the ``yield``, so an operation can turn a unique violation into its own ``StoreError``
or roll back to a savepoint of its own.

Why generators rather than DBOS's one class with dialect subclasses: the SQLite backend commits on
a synchronous writer thread (group commit, fsync shared across callers) while the PostgreSQL one is
async on a pool. A class with async methods cannot run inside SQLite's synchronous transaction
without a thread hop per statement; a generator runs in either, and keeps an operation's guard,
fencing check and row mapping in one function both backends drive. See docs/architecture.md.
"""

from __future__ import annotations

from runtime.store.core.dialect import Dialect
from runtime.store.core.statements import Duplicate, Executor, Failed, Op, Stmt, many, none, one, rows, value

__all__ = ["Dialect", "Duplicate", "Executor", "Failed", "Op", "Stmt", "many", "none", "one", "rows", "value"]
