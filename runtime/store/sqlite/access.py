"""The access layer's stores on SQLite: tokens, the audit trail, and the reads operations make."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from runtime.access.store import AUDIT_COLUMNS, TOKEN_COLUMNS, AuditRecord, TokenRecord
from runtime.errors import StoreError
from runtime.store.sqlite.database import SQLiteDatabase


class SQLiteTokenStore:
    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    async def add(self, token: TokenRecord) -> None:
        def fn(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    f"INSERT INTO access_tokens ({TOKEN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    token.row(),
                )
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"a token {token.id} exists already") from exc

        await self.db.write(fn)

    async def get(self, token_id: str) -> TokenRecord | None:
        def fn(conn: sqlite3.Connection) -> TokenRecord | None:
            row = conn.execute(f"SELECT {TOKEN_COLUMNS} FROM access_tokens WHERE id = ?", (token_id,)).fetchone()
            return None if row is None else TokenRecord.from_row(row)

        # a point read by primary key: on the loop's own connection, no thread hop (one per request)
        return await self.db.lookup(fn, small=lambda _conn: True)

    async def list(self) -> list[TokenRecord]:
        def fn(conn: sqlite3.Connection) -> list[TokenRecord]:
            rows = conn.execute(f"SELECT {TOKEN_COLUMNS} FROM access_tokens ORDER BY created_at, id")
            return [TokenRecord.from_row(r) for r in rows]

        return await self.db.read(fn)

    async def revoke(self, token_id: str, at: float) -> TokenRecord | None:
        def fn(conn: sqlite3.Connection) -> TokenRecord | None:
            conn.execute("UPDATE access_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (at, token_id))
            row = conn.execute(f"SELECT {TOKEN_COLUMNS} FROM access_tokens WHERE id = ?", (token_id,)).fetchone()
            return None if row is None else TokenRecord.from_row(row)

        return await self.db.write(fn)


class SQLiteAuditStore:
    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    async def append(self, records: Sequence[AuditRecord]) -> None:
        rows = [r.row() for r in records]

        def fn(conn: sqlite3.Connection) -> None:
            conn.executemany(
                f"INSERT INTO audit_log ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

        if rows:
            await self.db.write(fn)

    async def recent(self, limit: int) -> list[AuditRecord]:
        def fn(conn: sqlite3.Connection) -> list[AuditRecord]:
            rows = conn.execute("SELECT * FROM audit_log ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()
            return [AuditRecord.from_row(r) for r in reversed(rows)]

        return await self.db.read(fn)


class SQLiteOpsStore:
    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    async def ping(self) -> None:
        refused = self.db.refusal()  # a store that answers reads but refuses writes is not ready
        if refused is not None:
            raise refused
        await self.db.read(lambda conn: conn.execute("SELECT 1 FROM schema_migrations LIMIT 1").fetchall())

    async def run_counts(self) -> dict[str, int]:
        def fn(conn: sqlite3.Connection) -> dict[str, int]:
            return {r[0]: int(r[1]) for r in conn.execute("SELECT status, count(*) FROM runs GROUP BY status")}

        return await self.db.read(fn)

    async def step_durations(self, after: float, limit: int) -> list[tuple[float, str, float]]:
        def fn(conn: sqlite3.Connection) -> list[tuple[float, str, float]]:
            rows = conn.execute(
                "SELECT c.created_at, r.workflow, c.created_at - (SELECT max(s.created_at) FROM run_events s"
                "   WHERE s.run_id = c.run_id AND s.seq < c.seq AND s.type = 'step.started')"
                " FROM run_events c INDEXED BY step_completions JOIN runs r ON r.id = c.run_id"
                " WHERE c.type = 'step.completed' AND c.created_at > ? ORDER BY c.created_at LIMIT ?",
                (after, limit),
            )
            return [(float(r[0]), str(r[1]), max(0.0, float(r[2] or 0.0))) for r in rows]

        return await self.db.read(fn)
