"""OpenRath 2.0.0 sessions imported into a PostgreSQL store: the fork linked, its shared chunks the parent's,
a fork that came first linked through its parent's stub (tests/sessions/test_openrath_import.py: SQLite)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import Runtime
from runtime.sessions.openrath import session_id_of
from tests.sessions.test_openrath_import import (  # noqa: F401
    import_files,
    openrath_saved,
    rath_mcp,
    save_with_openrath,
)

pytestmark = pytest.mark.anyio


async def test_openrath_sessions_import_into_postgresql_in_either_order(
    tmp_path: Path,
    pg_url: str,
    save_with_openrath: Any,  # noqa: F811
) -> None:
    ids = save_with_openrath(tmp_path / "sessions")
    root, fork = session_id_of(ids["root"]), session_id_of(ids["fork"])
    home = tmp_path / "home"
    migrated = rath_mcp("migrate", "--home", str(home), "--store", pg_url)  # a PostgreSQL store is migrated apart
    assert migrated.returncode == 0, migrated.stderr
    for name in (ids["fork"], ids["root"]):  # the fork first: its parent is a stub until the parent comes
        done = import_files(home, tmp_path / "sessions" / f"{name}.jsonl", "--store", pg_url)
        assert done.returncode == 0 and done.stdout.startswith("imported"), done.stdout + done.stderr
    again = import_files(home, tmp_path / "sessions", "--store", pg_url)
    assert [line.split()[0] for line in again.stdout.splitlines()] == ["unchanged", "unchanged"], again.stdout
    async with Runtime.open(home, store=pg_url, workers=0) as rt:
        first, second = await rt.sessions.get(root), await rt.sessions.get(fork)
        assert (first.info.length, second.info.length, second.info.parents) == (6, 8, (root,))
        assert (first.info.usage.total_tokens, second.info.usage.total_tokens) == (150, 240)
        assert {c.trust for c in second.chunks} == {"external"}
        assert [tc.function.name for tc in second.chunks[2].tool_calls or ()] == ["read_file", "stat"]
        graph = await rt.sessions.lineage(fork)
        assert [(e.parent, e.child) for e in graph.edges] == [(root, fork)]
