"""The access layer's stores on SQLite: tokens, the audit trail, and the reads operations make."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from runtime.access.store import AuditRecord, TokenRecord
from runtime.errors import StoreError
from runtime.store.sqlite.database import SQLiteDatabase

_TOKEN_COLUMNS = "id, name, tenant, project, grants, salt, digest, created_at, expires_at, revoked_at"


def _token(row: sqlite3.Row) -> TokenRecord:
    return TokenRecord(
        id=row["id"],
        name=row["name"],
        tenant=row["tenant"],
        project=row["project"],
        grants=tuple(json.loads(row["grants"])),
        salt=bytes(row["salt"]),
        digest=bytes(row["digest"]),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
    )


class SQLiteTokenStore:
    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    async def add(self, token: TokenRecord) -> None:
        def fn(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    f"INSERT INTO access_tokens ({_TOKEN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        token.id,
                        token.name,
                        token.tenant,
                        token.project,
                        json.dumps(list(token.grants)),
                        token.salt,
                        token.digest,
                        token.created_at,
                        token.expires_at,
                        token.revoked_at,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"a token {token.id} exists already") from exc

        await self.db.write(fn)

    async def get(self, token_id: str) -> TokenRecord | None:
        def fn(conn: sqlite3.Connection) -> TokenRecord | None:
            row = conn.execute(f"SELECT {_TOKEN_COLUMNS} FROM access_tokens WHERE id = ?", (token_id,)).fetchone()
            return None if row is None else _token(row)

        # a point read by primary key: on the loop's own connection, no thread hop (one per request)
        return await self.db.lookup(fn, small=lambda _conn: True)

    async def list(self) -> list[TokenRecord]:
        def fn(conn: sqlite3.Connection) -> list[TokenRecord]:
            rows = conn.execute(f"SELECT {_TOKEN_COLUMNS} FROM access_tokens ORDER BY created_at, id")
            return [_token(r) for r in rows]

        return await self.db.read(fn)

    async def revoke(self, token_id: str, at: float) -> TokenRecord | None:
        def fn(conn: sqlite3.Connection) -> TokenRecord | None:
            conn.execute("UPDATE access_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (at, token_id))
            row = conn.execute(f"SELECT {_TOKEN_COLUMNS} FROM access_tokens WHERE id = ?", (token_id,)).fetchone()
            return None if row is None else _token(row)

        return await self.db.write(fn)


def _audit(row: sqlite3.Row) -> AuditRecord:
    return AuditRecord(
        seq=row["seq"],
        at=row["at"],
        actor=row["actor"],
        method=row["method"],
        tenant=row["tenant"],
        project=row["project"],
        action=row["action"],
        targets=tuple(json.loads(row["targets"])),
        outcome=row["outcome"],
        reason=row["reason"],
    )


class SQLiteAuditStore:
    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    async def append(self, records: Sequence[AuditRecord]) -> None:
        rows = [
            (r.at, r.actor, r.method, r.tenant, r.project, r.action, json.dumps(list(r.targets)), r.outcome, r.reason)
            for r in records
        ]

        def fn(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO audit_log (at, actor, method, tenant, project, action, targets, outcome, reason)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

        if rows:
            await self.db.write(fn)

    async def recent(self, limit: int) -> list[AuditRecord]:
        def fn(conn: sqlite3.Connection) -> list[AuditRecord]:
            rows = conn.execute("SELECT * FROM audit_log ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()
            return [_audit(r) for r in reversed(rows)]

        return await self.db.read(fn)


class SQLiteOpsStore:
    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    async def ping(self) -> None:
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
