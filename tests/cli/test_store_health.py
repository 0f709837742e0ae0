"""A damaged, foreign, read-only or hand-edited store, ``rath-mcp check`` and ``rath-mcp backup``.

Each case is met the way a user meets it: the CLI (``serve`` as a real process, the rest through
``main``), or an MCP client calling tools on a server whose store went wrong.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from anyio.abc import ByteReceiveStream
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rath_mcp.server import build_server
from runtime import Runtime
from runtime.store.sqlite.backend import sqlite_database
from runtime.store.sqlite.database import apply_migrations
from runtime.store.sqlite.migrations import ALL_MIGRATIONS
from tests.cli.conftest import ROOT, one_error_line, rath_here, rath_process
from tests.mcp.conftest import text_of
from tests.needs import unavailable

PAGE = 4096


FILL = """
import sys, anyio
from runtime import Runtime

async def fill(home, n):
    async with Runtime.open(home, workers=0) as rt:
        for i in range(n):
            await rt.sessions.create([{"kind": "user", "content": f"session {i} " * 40}])

anyio.run(fill, sys.argv[1], int(sys.argv[2]))
"""


def filled_store(home: Path, sessions: int = 200) -> Path:
    """A store with enough rows to span many pages, written and closed by another process (as a server
    that stopped leaves it: one file, no -wal or -shm beside it); returns its file."""
    subprocess.run([sys.executable, "-c", FILL, str(home), str(sessions)], check=True, cwd=ROOT, timeout=120)
    assert sorted(p.name for p in home.iterdir()) == ["rath.db"]
    return home / "rath.db"


def truncate(db: Path) -> None:
    os.truncate(db, db.stat().st_size // 3 + 100)


def garbage(db: Path) -> None:
    db.write_bytes(b"these are notes, not a database\n" * 2000)


def zero_a_middle_page(db: Path) -> None:
    with db.open("r+b") as f:
        f.seek(PAGE * (db.stat().st_size // PAGE // 2))
        f.write(b"\0" * PAGE)


def scramble_a_middle_page(db: Path) -> None:
    with db.open("r+b") as f:
        f.seek(PAGE * (db.stat().st_size // PAGE // 2))
        f.write(bytes(range(256)) * (PAGE // 256))


def foreign(db: Path) -> None:
    db.unlink()
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, caption TEXT)")


def drop_a_table(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE run_events")


DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated": (truncate, "is damaged"),
    "garbage": (garbage, "is damaged or not a database"),
    "zeroed middle page": (zero_a_middle_page, "is damaged"),
    "scrambled middle page": (scramble_a_middle_page, "is damaged"),
    "another program's database": (foreign, "is a SQLite database of another program"),
    "dropped table": (drop_a_table, "lacks table run_events"),
    "emptied": (lambda db: db.write_bytes(b""), "is an empty file (0 bytes)"),
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return filled_store(tmp_path_factory.mktemp("pristine") / "home")


def damaged(pristine: Path, tmp_path: Path, damage: Callable[[Path], None]) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(pristine, home / "rath.db")
    damage(home / "rath.db")
    return home


@pytest.mark.parametrize("case", list(DAMAGES))
def test_serve_on_a_damaged_store_exits_with_one_line_saying_where_and_what_to_do(
    case: str, pristine: Path, tmp_path: Path
) -> None:
    damage, says = DAMAGES[case]
    home = damaged(pristine, tmp_path, damage)
    done = rath_process("serve", "--home", str(home))
    line = one_error_line(done.stderr)
    assert done.returncode == 1 and done.stdout == ""
    assert says in line and str(home / "rath.db") in line
    assert "backup" in line or "another home" in line


@pytest.mark.parametrize("case", list(DAMAGES))
def test_every_command_on_a_damaged_store_is_one_line_and_check_says_it_is_not_healthy(
    case: str, pristine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damage, says = DAMAGES[case]
    home = damaged(pristine, tmp_path, damage)
    commands = [["sessions", "list"], ["runs", "list"], ["migrate"]]
    if case != "dropped table":  # a sound file with a table missing may still be copied, as evidence
        commands.append(["backup", str(tmp_path / "copy.db")])
    for argv in commands:
        code, _, err = rath_here(capsys, *argv, "--home", str(home))
        assert code == 1 and says in one_error_line(err), (argv, err)
    assert not (tmp_path / "copy.db").exists() and not list(tmp_path.glob(".copy.db*"))
    code, out, err = rath_here(capsys, "check", "--home", str(home))
    assert code == 1 and "Traceback" not in err
    assert out.strip().splitlines()[-1].startswith(f"{home / 'rath.db'} is NOT healthy")


def test_check_passes_a_sound_store_and_reports_a_pending_migration(
    pristine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = damaged(pristine, tmp_path, lambda db: None)
    code, out, err = rath_here(capsys, "check", "--home", str(home))
    assert code == 0, out
    assert out.splitlines() == [
        "integrity: ok",
        "schema: complete",
        "migrations: up to date",
        f"{home / 'rath.db'} is healthy",
    ]
    assert f"reading the store {home / 'rath.db'}" in err
    old = tmp_path / "old"  # a store an older version wrote: all migrations but the last
    old.mkdir()
    with closing(sqlite3.connect(old / "rath.db", isolation_level=None)) as conn:
        apply_migrations(conn, ALL_MIGRATIONS[:-1])
    home, last = old, ALL_MIGRATIONS[-1].name
    code, out, _ = rath_here(capsys, "check", "--home", str(home))
    assert code == 1 and f"  pending: {last} (apply with `rath-mcp migrate`)" in out
    assert out.splitlines()[-1].endswith("is NOT healthy: apply them with `rath-mcp migrate`")


@pytest.mark.anyio
async def test_a_table_dropped_under_a_running_server_gives_tool_errors_that_say_so(rt: Runtime) -> None:
    async with Client(build_server(rt)) as client:
        assert not (await client.call_tool("run_list", {})).is_error
        with sqlite3.connect(sqlite_database(rt.store).path) as conn:
            conn.execute("DROP TABLE run_events")
        started = await client.call_tool("run_start", {"workflow": "echo", "message": "hi"})
    assert started.is_error
    text = text_of(started)
    assert (
        f"the store at {sqlite_database(rt.store).path} lacks a table this version needs (no such table: run_events)"
        in text
    )
    assert "restore a backup" in text


def bwrap_or_skip() -> str:
    found = shutil.which("bwrap")
    if found is None:
        unavailable(
            "bubblewrap (bwrap), which makes the read-only home (a read-only mount)", "apt-get install bubblewrap"
        )
    return found


def read_only(bwrap: str, home: Path, *command: str) -> list[str]:
    """``command`` with ``home`` mounted read-only (root ignores file modes, a read-only mount it cannot)."""
    return [bwrap, "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--ro-bind", str(home), str(home), *command]


@pytest.mark.anyio
async def test_a_home_made_read_only_under_a_store_in_use_reads_but_writes_say_it_is_read_only(home: Path) -> None:
    bwrap = bwrap_or_skip()
    db = await anyio.to_thread.run_sync(filled_store, home, 3)
    in_use = sqlite3.connect(db)  # another process had the store open: its -wal and -shm exist beside it
    try:
        in_use.execute("SELECT COUNT(*) FROM sessions").fetchone()
        command = read_only(bwrap, home, sys.executable, "-m", "rath_mcp", "serve", "--home", str(home))
        params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT), env=dict(os.environ))
        async with Client(params) as client:
            listed = await client.call_tool("session_list", {})
            assert not listed.is_error and listed.structured_content is not None
            assert len(listed.structured_content["sessions"]) == 3
            created = await client.call_tool("session_create", {"message": "cannot be stored"})
    finally:
        in_use.close()
    assert created.is_error
    assert f"the store at {db} is read-only" in text_of(created)


@pytest.mark.parametrize("with_store", [True, False], ids=["a store", "no store yet"])
def test_serve_on_a_read_only_home_says_so_in_one_line(with_store: bool, home: Path) -> None:
    bwrap = bwrap_or_skip()
    if with_store:
        filled_store(home, 1)
    command = read_only(bwrap, home, sys.executable, "-m", "rath_mcp", "serve", "--home", str(home))
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=ROOT, check=False)
    line = one_error_line(done.stderr)
    assert done.returncode == 1 and f"the store at {home / 'rath.db'} is read-only" in line


SESSION_AND_RUN = """
import sys, anyio
from runtime import Runtime

async def fill(home):
    async with Runtime.open(home, workers=0) as rt:
        session = await rt.sessions.create([{"kind": "user", "content": "kept on a read-only home"}])
        run = await rt.runs.submit("echo", message="hi")
        print(session.id, run.id)

anyio.run(fill, sys.argv[1])
"""


def test_read_only_commands_read_a_store_on_a_read_only_home_and_check_says_it_is_read_only(home: Path) -> None:
    bwrap = bwrap_or_skip()
    filled = subprocess.run(
        [sys.executable, "-c", SESSION_AND_RUN, str(home)], capture_output=True, text=True, cwd=ROOT
    )
    assert filled.returncode == 0, filled.stderr
    session_id, run_id = filled.stdout.split()
    assert sorted(p.name for p in home.iterdir()) == ["rath.db"]  # closed: no -wal or -shm to read through
    said: dict[str, str] = {}
    for argv in (
        ["check"],
        ["sessions", "list"],
        ["sessions", "show", session_id],
        ["runs", "list"],
        ["runs", "show", run_id],
    ):
        command = read_only(bwrap, home, sys.executable, "-m", "rath_mcp", *argv, "--home", str(home))
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=ROOT, check=False)
        assert done.returncode == 0 and "error" not in done.stderr, (argv, done.stdout, done.stderr)
        said[" ".join(argv[:2])] = done.stdout
    assert said["check"].splitlines() == [
        "integrity: ok",
        "schema: complete",
        "migrations: up to date",
        "access: READ-ONLY here (a server cannot write it: make the file and its directory writable)",
        f"{home / 'rath.db'} is healthy, but read-only here",
    ]
    assert session_id in said["sessions list"] and "kept on a read-only home" in said["sessions show"]
    assert run_id in said["runs list"] and run_id in said["runs show"]
    assert sorted(p.name for p in home.iterdir()) == ["rath.db"]


class Counts:
    """The writer's running count, read from its stdout."""

    def __init__(self, stream: ByteReceiveStream) -> None:
        self.stream, self.buffer, self.last = stream, "", 0

    async def reach(self, n: int) -> int:
        while self.last < n:
            self.buffer += (await self.stream.receive()).decode()
            *lines, self.buffer = self.buffer.split("\n")
            if lines:
                self.last = int(lines[-1])
        return self.last


@pytest.mark.anyio
async def test_a_backup_taken_while_another_process_writes_is_a_sound_consistent_store(tmp_path: Path) -> None:
    home, copies = tmp_path / "home", tmp_path / "backups"
    copies.mkdir()
    async with await anyio.open_process([sys.executable, "-m", "tests.cli.writer", str(home)], cwd=ROOT) as writer:
        assert writer.stdin is not None and writer.stdout is not None
        counts = Counts(writer.stdout)
        with anyio.fail_after(90):  # a safety net only
            before = await counts.reach(50)
            backup = await anyio.run_process(
                [sys.executable, "-m", "rath_mcp", "backup", str(copies), "--home", str(home)], check=False, cwd=ROOT
            )
            kept = await anyio.to_thread.run_sync(_sessions_in, copies / "rath.db")
            later = await counts.reach(kept + 50)  # the writer went on past the copy's snapshot, undisturbed
        await writer.stdin.aclose()
        assert await writer.wait() == 0
    assert backup.returncode == 0, backup.stderr
    assert f"backed up {home / 'rath.db'} to {copies / 'rath.db'}" in backup.stdout.decode()
    assert sorted(p.name for p in copies.iterdir()) == ["rath.db"]  # one self-contained file, no -wal beside it
    assert before <= kept < later
    checked = await anyio.run_process([sys.executable, "-m", "rath_mcp", "check", "--home", str(copies)], check=False)
    assert checked.returncode == 0, checked.stdout
    numbers: list[int] = []
    async with Runtime.open(copies, workers=0) as rt:
        cursor: str | None = None
        while True:
            page, cursor = await rt.sessions.page(cursor, 500)
            for info in page:
                numbers.append(int(str((await rt.sessions.get(info.id)).messages()[0]["content"]).split()[1]))
            if cursor is None:
                break
    numbers.sort()
    assert numbers == list(range(kept))  # a snapshot: every write up to one commit, none after it, none torn


def _sessions_in(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])


def test_a_backup_restored_as_the_readme_says_serves_the_data_again(
    pristine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = damaged(pristine, tmp_path, lambda db: None)
    code, _, _ = rath_here(capsys, "backup", str(tmp_path / "rath-backup.db"), "--home", str(home))
    assert code == 0
    zero_a_middle_page(home / "rath.db")
    (home / "rath.db-wal").write_bytes(b"")  # a stale WAL the restore must not leave behind
    # The README's restore: with servers stopped, remove the store and its -wal/-shm, copy the backup in.
    for name in ("rath.db", "rath.db-wal", "rath.db-shm"):
        (home / name).unlink(missing_ok=True)
    shutil.copy(tmp_path / "rath-backup.db", home / "rath.db")
    code, out, _ = rath_here(capsys, "check", "--home", str(home))
    assert code == 0, out
    code, out, _ = rath_here(capsys, "sessions", "list", "--limit", "500", "--home", str(home))
    assert code == 0 and len(out.splitlines()) == 200
