"""Schema migrations on PostgreSQL: ordered, named, recorded, applied under an advisory lock.

Only ``rath-mcp migrate`` changes the schema (``apply``); ``serve`` and ``worker`` run as an
identity that may lack DDL rights, so they only *check* (``pending``, ``require_current``: reads of
``schema_migrations``, no DDL) and stop with one line naming the migrate command. Each migration
runs in a transaction of its own (PostgreSQL's DDL is transactional): one that fails leaves no
trace and is not recorded, the ones before it stay applied. Two migrators started at once queue
on ``pg_advisory_lock``, and the second finds nothing left to do. The list of migrations is the
caller's (``runtime.store.postgres.schema``).
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from runtime.errors import SchemaBehindError, StoreError
from runtime.ids import now
from runtime.store.migration import Migration
from runtime.store.postgres.faults import is_connection_lost, safe_location, unreachable

# The advisory lock every migrator takes (one 64-bit key per database; the bytes spell "rathmigr").
LOCK_KEY = int.from_bytes(b"rathmigr", "big") - (1 << 63)


class MigrationsPending(SchemaBehindError):
    """The store's schema is behind this version of rath-mcp; ``rath-mcp migrate`` brings it up."""

    def __init__(self, dsn: str, names: Sequence[str]) -> None:
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        super().__init__(
            f"the PostgreSQL store at {safe_location(dsn)} has {len(names)} migration(s) pending ({shown}): "
            f"run `rath-mcp migrate --store {public_url(dsn)}` first"
        )
        self.names = list(names)


def public_url(dsn: str) -> str:
    """The URL without its password (what error messages may show)."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = (parts.username or "") + "@" + (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


async def _connect(dsn: str, timeout: float) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(dsn, timeout=timeout)
    except Exception as exc:
        if is_connection_lost(exc):
            raise unreachable(safe_location(dsn), exc) from exc
        raise StoreError(f"could not connect to the PostgreSQL store at {safe_location(dsn)}: {exc}") from exc


async def _applied(conn: asyncpg.Connection) -> list[str]:
    if await conn.fetchval("SELECT to_regclass('schema_migrations')") is None:
        return []
    return [r[0] for r in await conn.fetch("SELECT name FROM schema_migrations ORDER BY applied_at, name")]


def _unknown(applied: Sequence[str], migrations: Sequence[Migration], dsn: str) -> None:
    known = {m.name for m in migrations}
    if strange := [name for name in applied if name not in known]:
        raise StoreError(
            f"the PostgreSQL store at {safe_location(dsn)} has migrations this rath-mcp does not know "
            f"({', '.join(strange[:3])}): it was migrated by a newer version; run that version"
        )


async def pending(dsn: str, migrations: Sequence[Migration], *, timeout: float = 5.0) -> list[str]:
    """Names of the migrations the store has not applied yet, in order. Reads only (no DDL rights needed)."""
    conn = await _connect(dsn, timeout)
    try:
        applied = await _applied(conn)
    finally:
        await conn.close()
    _unknown(applied, migrations, dsn)
    done = set(applied)
    return [m.name for m in migrations if m.name not in done]


async def require_current(dsn: str, migrations: Sequence[Migration]) -> None:
    """Raise ``MigrationsPending`` (its message names the migrate command) unless the schema is current."""
    if names := await pending(dsn, migrations):
        raise MigrationsPending(dsn, names)


async def apply(dsn: str, migrations: Sequence[Migration], *, timeout: float = 5.0) -> list[str]:
    """Apply the migrations not yet recorded, in order, under the advisory lock; returns their names."""
    names = [m.name for m in migrations]
    if len(set(names)) != len(names):
        raise StoreError("two migrations share a name: every migration needs a name of its own")
    conn = await _connect(dsn, timeout)
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", LOCK_KEY)
        try:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations"
                " (name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
            )
            applied = await _applied(conn)
            _unknown(applied, migrations, dsn)
            done: list[str] = []
            for migration in migrations:
                if migration.name in applied:
                    continue
                try:
                    async with conn.transaction():
                        await conn.execute(migration.sql)  # no arguments: the simple protocol, many statements
                        await conn.execute(
                            "INSERT INTO schema_migrations (name, applied_at) VALUES ($1, $2)", migration.name, now()
                        )
                except asyncpg.PostgresError as exc:
                    if is_connection_lost(exc):
                        raise
                    raise StoreError(
                        f"migration {migration.name} failed and was rolled back ({type(exc).__name__}: {exc}); "
                        "the ones before it stay applied"
                        + ("; the migrating identity needs DDL rights" if _is_privilege(exc) else "")
                    ) from exc
                done.append(migration.name)
            return done
        finally:
            if not conn.is_closed():
                await conn.execute("SELECT pg_advisory_unlock($1)", LOCK_KEY)
    except StoreError:
        raise
    except Exception as exc:
        if is_connection_lost(exc):
            raise unreachable(safe_location(dsn), exc) from exc
        if isinstance(exc, asyncpg.PostgresError):
            hint = "; the migrating identity needs DDL rights" if _is_privilege(exc) else ""
            raise StoreError(f"could not migrate the PostgreSQL store at {safe_location(dsn)}: {exc}{hint}") from exc
        raise
    finally:
        await conn.close()


def _is_privilege(exc: asyncpg.PostgresError) -> bool:
    return str(getattr(exc, "sqlstate", "")) == "42501"  # insufficient_privilege
