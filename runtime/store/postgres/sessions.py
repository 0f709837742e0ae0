"""``PostgresSessionStore``: the session store (``runtime.store.core.sessions``) on PostgreSQL."""

from __future__ import annotations

import asyncpg

from runtime.sessions.model import SessionInfo
from runtime.sessions.store import NewSession
from runtime.store.core.dialect import POSTGRES
from runtime.store.core.sessions import CoreSessionStore, insert_one
from runtime.store.postgres.database import PostgresDatabase
from runtime.store.postgres.executor import PostgresExecutor, drive


class PostgresSessionStore(CoreSessionStore):
    def __init__(self, db: PostgresDatabase, tenant: str, project: str) -> None:
        super().__init__(PostgresExecutor(db), tenant, project)

    async def insert_in(self, conn: asyncpg.Connection, new: NewSession) -> SessionInfo:
        """Write one session inside a write another store holds (a run's last commit makes its output session)."""
        return await drive(conn, insert_one(POSTGRES, self.scope, new))
