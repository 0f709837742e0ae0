"""The PostgreSQL database the PostgreSQL stores share: a pool, whole transactions, group commit.

``write(fn)`` and ``read(fn)`` run a whole unit of work, ``await fn(conn)``, in one transaction on
one pooled connection. Writes are *group committed*, as on SQLite: up to ``write_lanes`` write
transactions run at once, each on its own connection; while every lane is busy, new writes queue,
and the next lane to free takes all of them (up to ``MAX_BATCH``) into ONE transaction, each under
its own SAVEPOINT (so one failing write rolls back alone), committed with one COMMIT. At low load a
write is BEGIN, its statements, COMMIT; under load many writes share the BEGIN/COMMIT round trips
and the WAL flush. ``MAX_BATCH`` stays below 64 because PostgreSQL caches 64 subtransaction ids
per backend: past that, every other session's snapshots get slower ("suboverflow").

Round trips, not the server's work, set the pace under load: each one waits for the server and then
this process to be scheduled again. So writes that can be made together say so (``write``'s
``merge``): the step commits of a batch are ONE statement (``PostgresRunStore``), whose answer also
carries the transaction's id; the COMMIT carries the notifications (``commit_sending``). A batch of
step commits is then three round trips, BEGIN, the statement and COMMIT, whatever its size.

Two batches (in two lanes or two processes) may lock the same rows in different orders; PostgreSQL
then breaks the cycle by failing one statement with ``deadlock_detected``. That write alone is
rolled back (to its savepoint) and run again once its batch has committed and released its locks:
it is never applied twice, and its caller never sees the conflict (merged writes whose statement
fails are each run again alone). Notifications a write sends (``notify``) go out once it has
committed (see ``notify.py`` for why not inside it).

Faults. A connection lost before COMMIT was sent means the server rolled the transaction back:
the batch is re-run on a fresh connection (``fn`` must therefore touch nothing but ``conn``; every
idle connection of the pool is expired first, as a restarted server has dropped them all), and when
the server stays unreachable the caller gets a ``StoreUnavailableError`` saying so: nothing was
written, and the caller may try again later (the durable worker does, under its fencing token). A connection lost
*during* COMMIT is ambiguous: before committing we read the transaction's id, and afterwards ask
the server (``pg_xact_status``) what became of it: committed (the write succeeded), aborted
(nothing was written: re-run; so is an id the server says it never assigned, which a server that
crashed before the transaction's WAL reached its disk may say), or, if the server cannot be asked
within ``resolve_window`` seconds, ``AmbiguousCommitError``; it is never retried blindly.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

import anyio
import asyncpg

from runtime.errors import StoreError
from runtime.store.postgres.faults import (
    CONNECT_TIMEOUT_S,
    AmbiguousCommitError,
    is_connection_lost,
    is_future_xid,
    safe_location,
    unreachable,
)
from runtime.store.postgres.notify import commit_sending, holding
from runtime.store.postgres.writes import Lost, Merge, Work, Write, committed, gone, lock_conflict, run_unit, units

T = TypeVar("T")

_ATTEMPTS = 3  # a batch lost before its commit is re-run at most this many times in all
_LOCK_ROUNDS = 5  # a write that lost a deadlock is run again after its batch, at most this many times in all
MAX_BATCH = 50  # writes in one transaction at most (below the 64 subtransactions PostgreSQL caches)
log = logging.getLogger(__name__)


async def _reset(conn: asyncpg.Connection) -> None:
    """Ready a connection going back to the pool. asyncpg's default reset is a round trip on every
    release (UNLISTEN, RESET ALL, advisory unlocks), for session state this code never leaves on a
    pooled connection (it listens on a connection of its own and takes only transaction-level locks
    and settings): only a transaction left open by a failure needs ending."""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


class PostgresDatabase:
    """A PostgreSQL database opened for the runtime: pooled connections, group-committed writes."""

    def __init__(
        self,
        dsn: str,
        *,
        max_size: int = 8,
        write_lanes: int | None = None,
        resolve_window: float = 10.0,
    ) -> None:
        self.dsn = dsn
        self.where = safe_location(dsn)
        self.max_size = max_size
        self.write_lanes = write_lanes or max(1, max_size // 2)
        self.resolve_window = resolve_window
        self._pool: asyncpg.Pool | None = None
        self._closing = False  # no new work; batches already running finish (and resolve) on the pool
        self._pending: list[Write[Any]] = []
        self._busy = 0
        self._lane_free = anyio.Event()
        self._idle = anyio.Event()
        self._idle.set()
        self.stats = {"batches": 0, "writes": 0, "merged": 0, "reruns": 0, "resolved": 0, "deadlocks": 0}
        #: the read operations (functions) seen to run more than one statement (``PostgresExecutor.read``)
        self.several_reads: set[Any] = set()

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn,
                min_size=1,
                max_size=self.max_size,
                timeout=CONNECT_TIMEOUT_S,
                server_settings={"application_name": "rath-mcp"},
                reset=_reset,
            )
        except Exception as exc:
            if is_connection_lost(exc):
                raise unreachable(self.where, exc) from exc
            raise StoreError(f"could not open the PostgreSQL store at {self.where}: {exc}") from exc

    async def close(self) -> None:
        """Refuse new work, let running batches finish (queued writes then fail), close every connection."""
        with anyio.CancelScope(shield=True):
            self._closing = True
            await self._idle.wait()
            pool, self._pool = self._pool, None
            if pool is not None:
                with anyio.move_on_after(10) as scope:
                    await pool.close()
                if scope.cancelled_caught:
                    pool.terminate()

    async def __aenter__(self) -> PostgresDatabase:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _live_pool(self) -> asyncpg.Pool:
        if self._pool is None or self._closing:
            raise StoreError("the database is closed")
        return self._pool

    def _batch_pool(self) -> asyncpg.Pool:
        """The pool for a batch already under way: it may finish (rerun, resolve) while closing."""
        if self._pool is None:
            raise StoreError("the database is closed")
        return self._pool

    # -- writes -----------------------------------------------------------------------------
    async def write(self, fn: Work[T], *, merge: Merge | None = None, payload: Any = None) -> T:
        """Run ``await fn(conn)`` inside a write transaction and return its result once committed.

        If ``fn`` raises, its changes (and only its) are rolled back and its error is re-raised.
        ``fn`` may be run more than once (when the connection is lost before the commit), so it
        must not touch anything but ``conn``. With ``merge``, the writes of a batch sharing it are
        made by one call of it, given their ``payload``s (``Merge``); ``fn`` makes this one alone
        when that call fails.
        """
        self._live_pool()
        item: Write[T] = Write(fn, merge, payload)
        self._pending.append(item)
        try:
            while not item.taken:
                if self._closing:
                    raise StoreError("the database is closed")
                if self._busy < self.write_lanes:
                    await self._lead()
                else:
                    await self._lane_free.wait()
            await item.settled.wait()
        except BaseException:
            if not item.taken and item in self._pending:  # not taken yet: withdraw it, nothing was written
                self._pending.remove(item)
            raise
        if item.error is not None:
            raise item.error
        return item.result  # type: ignore[no-any-return]

    async def _lead(self) -> None:
        items, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
        for item in items:
            item.taken = True
        if self._busy == 0:
            self._idle = anyio.Event()
        self._busy += 1
        try:
            with anyio.CancelScope(shield=True):  # its writers must learn how the batch ended
                await self._run_batch(items)
        finally:
            for item in items:
                item.settled.set()
            self._busy -= 1
            lane_free, self._lane_free = self._lane_free, anyio.Event()
            lane_free.set()
            if self._busy == 0:
                self._idle.set()

    async def _run_batch(self, items: list[Write[Any]]) -> None:
        self.stats["batches"] += 1
        self.stats["writes"] += len(items)
        for _ in range(_LOCK_ROUNDS):
            await self._run_round(items)
            items = [item for item in items if item.retry]  # deadlock victims, rolled back alone: run again
            if not items:
                return
            self.stats["deadlocks"] += len(items)
            for item in items:
                item.retry = False

    async def _run_round(self, items: list[Write[Any]]) -> None:
        for attempt in range(_ATTEMPTS):
            for item in items:
                item.result, item.error, item.retry = None, None, False
            try:
                async with self._batch_pool().acquire() as conn:
                    await self._commit_batch(conn, items)
                return
            except Lost as lost:
                if attempt == _ATTEMPTS - 1:
                    error: BaseException = unreachable(self.where, lost.cause)
                    break
                self.stats["reruns"] += 1
                await self._expire_idle()
            except StoreError as exc:
                error = exc
                break
            except Exception as exc:
                gone = is_connection_lost(exc)
                error = unreachable(self.where, exc) if gone else StoreError(f"the write transaction failed: {exc}")
                break
            except BaseException:
                for item in items:
                    if not item.settled.is_set():
                        item.result, item.error = None, StoreError("the write transaction was interrupted")
                raise
        for item in items:
            if not item.settled.is_set():  # a write already committed and told so keeps its result
                item.result, item.error = None, error

    async def _commit_batch(self, conn: asyncpg.Connection, items: list[Write[Any]]) -> None:
        parts = units(items)
        single = len(parts) == 1
        held: list[tuple[str, str]] = []  # notifications of the writes that stay in: sent with the COMMIT
        xid: str | None = None
        try:
            await conn.execute("BEGIN" if single else "BEGIN; SAVEPOINT w")
            for i, unit in enumerate(parts):
                if i:
                    await conn.execute("RELEASE SAVEPOINT w; SAVEPOINT w")
                try:
                    with holding() as notes:
                        xid = await run_unit(conn, unit) or xid
                    held += notes
                    self.stats["merged"] += len(unit) if unit[0].merge is not None else 0
                except Exception as exc:
                    if gone(conn, exc):
                        raise
                    for item in unit:  # a merged unit's writes are each made alone next
                        item.error, item.retry = exc, lock_conflict(exc) or item.merge is not None
                        item.merge = None
                    await conn.execute("ROLLBACK" if single else "ROLLBACK TO SAVEPOINT w")
                    if single:
                        return
            if xid is None:
                xid = await conn.fetchval("SELECT pg_current_xact_id_if_assigned()::text")
        except Exception as exc:
            if gone(conn, exc):
                raise Lost(exc) from exc
            raise
        try:
            await conn.execute(commit_sending(held))
        except Exception as exc:
            if gone(conn, exc):
                if xid is None:
                    return  # it had written nothing, so there is nothing it could have lost
                await self._resolve(xid, exc)
                return  # committed, but its connection is gone: its notifications are left to the polling fallback
            if not await committed(conn, xid):
                # Refused at commit (a deferred constraint, a serialization failure): nothing was written.
                for item in items:
                    if item.error is None:
                        item.result, item.error = None, StoreError(f"the write transaction was refused: {exc}")
                return
            log.warning("could not send %d notification(s) after a commit", len(held), exc_info=True)
        for item in items:
            if not item.retry:
                item.settled.set()

    async def _resolve(self, xid: str, cause: BaseException) -> None:
        """Learn from the server whether transaction ``xid`` committed; raise ``Lost`` if it did not."""
        self.stats["resolved"] += 1
        deadline = anyio.current_time() + self.resolve_window
        last: BaseException = cause
        delay = 0.02
        while True:
            try:
                async with self._batch_pool().acquire() as conn:
                    status = await conn.fetchval("SELECT pg_xact_status($1::text::xid8)", xid)
                if status == "committed":
                    return
                if status == "aborted":
                    raise Lost(cause)
            except (Lost, StoreError):
                raise
            except Exception as exc:
                if is_future_xid(exc):
                    raise Lost(cause) from exc
                if not is_connection_lost(exc):
                    raise
                last = exc
            # "in progress" (its backend still running) or the server not answering yet: ask again.
            if anyio.current_time() + delay > deadline:
                raise AmbiguousCommitError(self.where, xid, last)
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def _expire_idle(self) -> None:
        """A connection was lost: the others were most likely lost with it (a server restart drops them
        all), so every idle one is replaced on its next acquire rather than tried and found dead, one
        attempt each (which could use up a write's attempts on a server that is up again)."""
        if self._pool is not None:
            await self._pool.expire_connections()

    # -- reads ------------------------------------------------------------------------------
    async def read(self, fn: Work[T], *, alone: bool = False) -> T:
        """Run ``await fn(conn)`` in one read-only REPEATABLE READ transaction (one consistent snapshot).
        ``alone``: ``fn`` runs one statement, a consistent snapshot by itself: it runs with no transaction
        around it (no BEGIN and COMMIT, two round trips of three).

        A read whose connection is lost is simply run again (up to a few times) on a fresh one.
        """
        last: BaseException | None = None
        for _ in range(_ATTEMPTS):
            try:
                async with self._live_pool().acquire() as conn:
                    if alone:
                        return await fn(conn)
                    async with conn.transaction(isolation="repeatable_read", readonly=True):
                        return await fn(conn)
            except StoreError:
                raise
            except Exception as exc:
                if not is_connection_lost(exc):
                    raise
                last = exc
                await self._expire_idle()
        assert last is not None
        raise unreachable(self.where, last) from last
