"""The session store's reads over lists of ids, on SQLite: an index probe per id, never a scan of a scope.

SQLite has no statistics here, so its planner would rather scan a tenant/project's sessions by the
(tenant, project, stub, id) index than probe the primary key once per listed id: a lineage or merge
would then cost every session of the scope. The store drives those queries from the list instead.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runtime import Runtime
from runtime.store.core import sessions as ops
from runtime.store.core.dialect import SQLITE
from runtime.store.sqlite.backend import sqlite_database
from runtime.store.sqlite.executor import drive

pytestmark = pytest.mark.anyio
TABLES = ("sessions", "session_parents", "segments", "chunks")


async def test_lineage_ancestry_and_branch_tails_probe_indexes_for_each_listed_id(tmp_path: Path) -> None:
    async with Runtime.open(tmp_path, workers=0) as rt:
        s = rt.sessions
        root = (await s.create([{"kind": "user", "content": "hello"}])).id
        a = (await s.append((await s.fork(root))[0].id, [{"kind": "user", "content": "a"}])).id
        b = (await s.append((await s.fork(root))[0].id, [{"kind": "user", "content": "b"}])).id
        merged = (await s.merge([a, b])).id
        scope = ("local", "default")
        ran: list[str] = []

        def read(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            conn.set_trace_callback(ran.append)  # the statements as run, their arguments in place
            try:
                drive(conn, ops.lineage(SQLITE, scope, merged, 5, True, True, 100))
                drive(conn, ops.ancestry(SQLITE, scope, [merged]))
                drive(conn, ops.branch_tails(SQLITE, scope, [a, b]))
            finally:
                conn.set_trace_callback(None)
            return [(sql, " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql))) for sql in ran]

        plans = await sqlite_database(rt.store).read(read)
    assert len(plans) >= 6
    for sql, plan in plans:
        scans = [step for step in plan.split(" | ") if step.startswith("SCAN") and step.split()[1] in TABLES]
        assert not scans and "sessions_scope (tenant=? AND project=?)" not in plan, (sql, plan)
