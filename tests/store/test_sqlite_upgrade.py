"""A SQLite store made before a migration keeps what it holds when it is opened by this version."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runtime.store import open_backend, parse_store_url
from runtime.store.sqlite.database import apply_migrations
from runtime.store.sqlite.migrations import ALL_MIGRATIONS

pytestmark = pytest.mark.anyio


async def test_checkpoints_kept_in_their_own_table_are_moved_onto_their_events(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    apply_migrations(conn, [m for m in ALL_MIGRATIONS if m.name != "0112_durable_checkpoints_on_events"])
    conn.execute(
        "INSERT INTO runs (id, tenant, project, workflow, plan_hash, input, status, state, request_hash, next_at, "
        "created_at, updated_at, last_seq) VALUES ('run_1', 'local', 'default', 'wf', 'h', '{}', 'succeeded', "
        "'{\"n\": 2}', 'r', 1, 1, 2, 3)"
    )
    events = [(1, "run.created"), (2, "checkpoint.created"), (3, "run.state.changed")]
    conn.executemany(
        "INSERT INTO run_events (run_id, seq, type, data, created_at) VALUES ('run_1', ?, ?, '{}', 2)", events
    )
    conn.execute(
        "INSERT INTO run_checkpoints (run_id, seq, state, next_step, pending, session_id, created_at) "
        "VALUES ('run_1', 2, '{\"n\": 2}', NULL, '[]', 'ses_1', 2)"
    )
    conn.close()
    backend = await open_backend(parse_store_url(f"sqlite://{path}"))
    try:
        store = backend.runs("local", "default")
        assert await store.checkpoints("run_1") == [
            {"seq": 2, "state": {"n": 2}, "next_step": None, "pending": [], "session_id": "ses_1", "created_at": 2}
        ]
        assert [(e.seq, e.type, e.data) for e in await store.events("run_1", 0, 10)] == [
            (1, "run.created", {}), (2, "checkpoint.created", {}), (3, "run.state.changed", {})
        ]  # fmt: skip
    finally:
        await backend.close()
