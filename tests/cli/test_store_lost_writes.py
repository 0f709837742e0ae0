"""A damaged or vanished store never acknowledges a write it will lose.

SQLite goes on committing to a file it has open, whatever became of it: damaged, it still takes the
writes that miss its bad pages; deleted, moved or replaced under a running server, it takes them all,
into a file that is gone when the server stops. Each case is met as a user meets it: an MCP client
calling tools on a server over a real store file, or ``rath-mcp`` as a real process.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import anyio.to_thread
import httpx2
import pytest
from mcp import Client
from mcp.types import CallToolResult

from rath_mcp.server import build_server
from runtime import Runtime
from runtime.store.sqlite.database import apply_migrations
from runtime.store.sqlite.migrations import ALL_MIGRATIONS
from tests.auth.conftest import rath_http
from tests.cli.conftest import ROOT, one_error_line, rath_process
from tests.cli.test_store_health import PAGE, filled_store
from tests.mcp.conftest import text_of


def the_line(result: CallToolResult) -> str:
    """What a tool error says about the store (after the tool's own prefix)."""
    text = text_of(result)
    assert result.is_error and "the store at " in text, text
    return text[text.index("the store at ") :]


def scramble_page(db: Path, page: int) -> None:
    with db.open("r+b") as f:
        f.seek(PAGE * (page - 1))
        f.write(bytes(range(256)) * (PAGE // 256))


@pytest.mark.anyio
async def test_once_a_read_meets_damage_under_a_running_server_every_write_is_refused_with_that_line(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    db = await anyio.to_thread.run_sync(filled_store, home, 200)
    with closing(sqlite3.connect(db)) as conn:  # read apart from the server: its connections stay cold
        ids = [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY id LIMIT 3")]
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sessions'").fetchone()
    async with Runtime.open(home, workers=1) as rt, Client(build_server(rt)) as client:
        scramble_page(db, root)  # every read of a session goes through this page
        read = await client.call_tool("session_get", {"session_id": ids[0]})
        said = the_line(read)
        assert said.startswith(f"the store at {db} is damaged (database disk image is malformed)")
        created = await client.call_tool("session_create", {"message": "would go into a damaged file"})
        started = await client.call_tool("run_start", {"workflow": "echo", "message": "hi"})
        forked = await client.call_tool("session_fork", {"session_id": ids[1]})
        for refused in (created, started, forked):
            assert the_line(refused) == said
        assert "restore a backup" in said


def delete(db: Path) -> None:
    db.unlink()


def move_away(db: Path) -> None:
    db.rename(db.with_name("moved.db"))


def restore_under_it(db: Path) -> None:
    """A copy of the store put in its place, as a restore made while the server runs would."""
    shutil.copy(db, db.with_name("copy.db"))
    os.replace(db.with_name("copy.db"), db)


def delete_the_wal(db: Path) -> None:
    db.with_name(db.name + "-wal").unlink()


VANISHINGS: dict[str, tuple[Callable[[Path], None], str]] = {
    "deleted": (delete, "was deleted or moved away while this process had it open"),
    "moved away": (move_away, "was deleted or moved away while this process had it open"),
    "replaced": (restore_under_it, "was replaced by another file while this process had it open"),
    "its -wal deleted": (delete_the_wal, "lost its write-ahead log"),
}


@pytest.mark.parametrize("case", list(VANISHINGS))
@pytest.mark.anyio
async def test_a_store_file_that_vanishes_under_a_running_server_acknowledges_no_write_it_then_loses(
    case: str, tmp_path: Path
) -> None:
    vanish, says = VANISHINGS[case]
    home = tmp_path / "home"
    db = home / "rath.db"
    acknowledged: list[str] = []
    async with Runtime.open(home, workers=0) as rt, Client(build_server(rt)) as client:
        assert not (await client.call_tool("session_create", {"message": "before"})).is_error
        vanish(db)
        results = [await client.call_tool("session_create", {"message": f"after {i}"}) for i in range(5)]
        acknowledged += [str(r.structured_content["session_id"]) for r in results if r.structured_content]
        started = await client.call_tool("run_start", {"workflow": "echo", "message": "hi"})
    lines = [the_line(r) for r in [*results, started]]
    assert not acknowledged
    assert all(line == lines[0] for line in lines)
    assert f"{db}" in lines[0] and says in lines[0]
    assert "writes are refused from now on" in lines[0] and "restart the server" in lines[0]
    async with Runtime.open(home, workers=0) as rt:  # the restart the line asks for serves again
        await rt.sessions.create([{"kind": "user", "content": "after the restart"}])


@pytest.mark.anyio
async def test_readiness_says_the_store_refuses_writes_once_its_file_is_deleted(tmp_path: Path) -> None:
    async with Runtime.open(tmp_path / "home", workers=0) as rt, rath_http(rt) as served, httpx2.AsyncClient() as http:
        assert (await http.get(f"{served.base}/health/ready")).json() == {"status": "ready"}
        (tmp_path / "home" / "rath.db").unlink()
        answer = await http.get(f"{served.base}/health/ready")
    assert answer.status_code == 503
    assert f"the store at {tmp_path / 'home' / 'rath.db'} was deleted or moved away" in answer.json()["reason"]


@pytest.mark.parametrize("command", [["serve"], ["sessions", "list"], ["migrate"], ["migrate", "--check"]])
def test_an_empty_store_file_is_an_error_naming_it_not_a_fresh_store(command: list[str], tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "rath.db").write_bytes(b"")
    done = rath_process(*command, "--home", str(home))
    line = one_error_line(done.stderr)
    assert done.returncode == 1 and done.stdout == ""
    assert f"the store at {home / 'rath.db'} is an empty file (0 bytes)" in line
    assert "restore a backup" in line and "remove the empty file" in line
    assert (home / "rath.db").stat().st_size == 0 and sorted(p.name for p in home.iterdir()) == ["rath.db"]


def test_a_new_home_without_a_store_file_still_gets_a_new_store(tmp_path: Path) -> None:
    home = tmp_path / "new" / "home"
    done = rath_process("serve", "--home", str(home))
    assert done.returncode == 0, done.stderr
    done = rath_process("check", "--home", str(home))
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == f"{home / 'rath.db'} is healthy"


def wait_for_lock_waiter(directory: Path, process: subprocess.Popen[str]) -> None:
    """Until ``/proc/locks`` shows ``process`` waiting for a ``flock`` on ``directory``."""
    inode, deadline = os.stat(directory).st_ino, time.monotonic() + 60  # a safety net only
    while not any(
        " -> FLOCK " in line and f" {process.pid} " in line and f":{inode} " in line
        for line in Path("/proc/locks").read_text().splitlines()
    ):
        assert process.poll() is None, f"the opener went on without waiting: {process.communicate()}"
        assert time.monotonic() < deadline, "the opener never waited for the directory's lock"
        time.sleep(0.01)  # polling a condition, not timing: the assertion is on what the kernel shows


def test_an_empty_file_another_process_is_making_into_a_store_is_waited_for_not_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = home / "rath.db"
    fd = os.open(home, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a process making a new store holds it until the file has a page
        db.write_bytes(b"")  # SQLite creates the file empty
        opener = subprocess.Popen(
            [sys.executable, "-m", "rath_mcp", "migrate", "--home", str(home)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for_lock_waiter(home, opener)
            with closing(sqlite3.connect(db, isolation_level=None)) as conn:  # the other process makes the store
                conn.execute("PRAGMA journal_mode=WAL")
                apply_migrations(conn, ALL_MIGRATIONS)
        except BaseException:
            opener.kill()
            raise
    finally:
        os.close(fd)
    out, err = opener.communicate(timeout=60)
    assert opener.returncode == 0, err
    assert out.strip() == f"{db} was already up to date"
