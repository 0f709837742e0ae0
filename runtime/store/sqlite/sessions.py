"""``SQLiteSessionStore``: the session store (``runtime.store.core.sessions``) on the embedded SQLite database."""

from __future__ import annotations

import sqlite3

from runtime.sessions.model import SessionInfo
from runtime.sessions.store import NewSession
from runtime.store.core.dialect import SQLITE
from runtime.store.core.sessions import CoreSessionStore, insert_one
from runtime.store.sqlite.database import SQLiteDatabase
from runtime.store.sqlite.executor import SQLiteExecutor, drive


class SQLiteSessionStore(CoreSessionStore):
    def __init__(self, db: SQLiteDatabase, tenant: str, project: str) -> None:
        super().__init__(SQLiteExecutor(db), tenant, project)

    def insert_in(self, conn: sqlite3.Connection, new: NewSession) -> SessionInfo:
        """Write one session inside a write another store holds (a run's last commit makes its output session)."""
        return drive(conn, insert_one(SQLITE, self.scope, new))
