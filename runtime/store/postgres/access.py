"""The access layer's stores on PostgreSQL: tokens, the audit trail, and the reads operations make.

A token is read from its row on every request (one indexed point read on the pool), so a
revocation committed by any process is seen by the next request of every other one.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from runtime.access.store import AUDIT_COLUMNS, TOKEN_COLUMNS, AuditRecord, TokenRecord
from runtime.errors import StoreError
from runtime.store.postgres.database import PostgresDatabase


class PostgresTokenStore:
    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    async def add(self, token: TokenRecord) -> None:
        async def fn(conn: asyncpg.Connection) -> None:
            try:
                await conn.execute(
                    f"INSERT INTO access_tokens ({TOKEN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                    *token.row(),
                )
            except asyncpg.UniqueViolationError as exc:
                raise StoreError(f"a token {token.id} exists already") from exc

        await self.db.write(fn)

    async def get(self, token_id: str) -> TokenRecord | None:
        async def fn(conn: asyncpg.Connection) -> TokenRecord | None:
            row = await conn.fetchrow(f"SELECT {TOKEN_COLUMNS} FROM access_tokens WHERE id = $1", token_id)
            return None if row is None else TokenRecord.from_row(row)

        return await self.db.read(fn)

    async def list(self) -> list[TokenRecord]:
        async def fn(conn: asyncpg.Connection) -> list[TokenRecord]:
            rows = await conn.fetch(f"SELECT {TOKEN_COLUMNS} FROM access_tokens ORDER BY created_at, id")
            return [TokenRecord.from_row(r) for r in rows]

        return await self.db.read(fn)

    async def revoke(self, token_id: str, at: float) -> TokenRecord | None:
        async def fn(conn: asyncpg.Connection) -> TokenRecord | None:
            await conn.execute(
                "UPDATE access_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL", at, token_id
            )
            row = await conn.fetchrow(f"SELECT {TOKEN_COLUMNS} FROM access_tokens WHERE id = $1", token_id)
            return None if row is None else TokenRecord.from_row(row)

        return await self.db.write(fn)


class PostgresAuditStore:
    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    async def append(self, records: Sequence[AuditRecord]) -> None:
        rows = [r.row() for r in records]

        async def fn(conn: asyncpg.Connection) -> None:
            await conn.executemany(
                f"INSERT INTO audit_log ({AUDIT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                rows,
            )

        if rows:
            await self.db.write(fn)

    async def recent(self, limit: int) -> list[AuditRecord]:
        async def fn(conn: asyncpg.Connection) -> list[AuditRecord]:
            rows = await conn.fetch("SELECT * FROM audit_log ORDER BY seq DESC LIMIT $1", limit)
            return [AuditRecord.from_row(r) for r in reversed(rows)]

        return await self.db.read(fn)


class PostgresOpsStore:
    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    async def ping(self) -> None:
        async def fn(conn: asyncpg.Connection) -> None:
            await conn.fetchval("SELECT 1 FROM schema_migrations LIMIT 1")

        await self.db.read(fn)

    async def run_counts(self) -> dict[str, int]:
        async def fn(conn: asyncpg.Connection) -> dict[str, int]:
            rows = await conn.fetch("SELECT status, count(*) FROM runs GROUP BY status")
            return {r[0]: int(r[1]) for r in rows}

        return await self.db.read(fn)

    async def step_durations(self, after: float, limit: int) -> list[tuple[float, str, float]]:
        async def fn(conn: asyncpg.Connection) -> list[tuple[float, str, float]]:
            rows = await conn.fetch(
                "SELECT c.created_at, r.workflow, c.created_at - (SELECT max(s.created_at) FROM run_events s"
                "   WHERE s.run_id = c.run_id AND s.seq < c.seq AND s.type = 'step.started')"
                " FROM run_events c JOIN runs r ON r.id = c.run_id"
                " WHERE c.type = 'step.completed' AND c.created_at > $1 ORDER BY c.created_at LIMIT $2",
                after,
                limit,
            )
            return [(float(r[0]), str(r[1]), max(0.0, float(r[2] or 0.0))) for r in rows]

        return await self.db.read(fn)
