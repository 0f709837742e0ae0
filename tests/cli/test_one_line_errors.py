"""Every CLI error is one line on stderr and a non-zero exit, never a traceback (CONTRACT §3)."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest

from rath_mcp.cli import build_parser
from runtime import Runtime
from tests.cli.conftest import one_error_line, rath_here, rath_process

BAD_USAGE = [
    [],
    ["bogus"],
    ["--frobnicate"],
    ["serve", "--workers", "-1"],
    ["serve", "--workers", "many"],
    ["serve", "--port", "70000"],
    ["serve", "--port", "-5"],
    ["serve", "--transport", "tcp"],
    ["serve", "--sandbox", "docker"],
    ["serve", "--workflows"],
    ["worker", "--workers", "0"],
    ["worker", "--lease-s", "0"],
    ["worker", "--lease-s", "nan"],
    ["worker", "--lease-s", "inf"],
    ["sessions"],
    ["sessions", "list", "--limit", "0"],
    ["sessions", "show"],
    ["sessions", "lineage", "ses_x", "--depth", "-2"],
    ["runs", "list", "--limit", "x"],
    ["runs", "show"],
    ["backup"],
    ["migrate", "--nope"],
]


@pytest.mark.parametrize("argv", BAD_USAGE, ids=lambda argv: " ".join(argv) or "(nothing)")
def test_bad_usage_is_one_line_naming_the_help_and_exit_two(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = rath_here(capsys, *argv)
    line = one_error_line(err)
    assert code == 2 and out == ""
    assert line.startswith("rath-mcp") and "--help" in line


def store_with_a_session(home: Path, *messages: str) -> list[str]:
    async def make() -> list[str]:
        async with Runtime.open(home, workers=0) as rt:
            return [
                (await rt.sessions.create([{"kind": "user", "content": m}] * (i + 1))).id
                for i, m in enumerate(messages)
            ]

    return anyio.run(make)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["runs", "list", "--status", "sleeping"], "status 'sleeping' is not one of"),
        (["runs", "show", "run_missing"], "`rath-mcp runs list`"),
        (["sessions", "show", "ses_missing"], "`rath-mcp sessions list`"),
        (["sessions", "lineage", "ses_missing"], "`rath-mcp sessions list`"),
        (["sessions", "lineage", "ses_missing", "--depth", "5000"], "depth must be between 1 and 1000"),
        (["sessions", "list", "--limit", "501"], "limit must be between 1 and 500"),
    ],
)
def test_a_domain_error_is_one_line_in_the_shells_words_and_exit_one(
    argv: list[str], says: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_with_a_session(home, "hi")
    code, out, err = rath_here(capsys, *argv, "--home", str(home))
    line = one_error_line(err)
    assert code == 1 and out == ""
    assert line.startswith("rath-mcp: error:") and says in line
    assert "run_list" not in line and "session_list" not in line  # MCP tool names mean nothing in a shell


@pytest.mark.parametrize(
    "argv",
    [
        ["sessions", "list"],
        ["runs", "list"],
        ["runs", "show", "run_x"],
        ["migrate", "--check"],
        ["check"],
        ["backup", "copy.db"],
    ],
)
def test_inspecting_a_home_without_a_store_says_how_to_make_one_and_creates_nothing(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "nothing-here"
    code, out, err = rath_here(capsys, *argv, "--home", str(home))
    line = one_error_line(err)
    assert code == 1 and out == ""
    assert f"there is no store at {home / 'rath.db'}" in line and f"rath-mcp migrate --home {home}" in line
    assert not home.exists() and not (tmp_path / "copy.db").exists()


def test_inspection_says_on_stderr_which_store_it_read_and_keeps_stdout_to_the_listing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one, two = store_with_a_session(home, "one", "two")
    code, out, err = rath_here(capsys, "sessions", "list", "--home", str(home))
    assert code == 0
    assert err.strip() == f"rath-mcp: reading the store {home / 'rath.db'} (home {home})"
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == [two, one]
    assert " 2 chunks " in lines[0] and " 1 chunk " in lines[1]  # not "1 chunks"


def test_version_and_help_with_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = rath_here(capsys, "--version")
    assert code == 0 and out.startswith("rath-mcp 0.")
    serve_help = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()  # type: ignore[union-attr]
    for default in ("(default: stdio)", "(default: 127.0.0.1)", "(default: 8765)", "(default: 4)", "(default: local)"):
        assert default in serve_help, default
    assert "~/.rath" in serve_help


def test_the_default_home_is_under_the_users_home_not_the_working_directory(tmp_path: Path) -> None:
    user_home, elsewhere = tmp_path / "user", tmp_path / "cwd"
    user_home.mkdir()
    elsewhere.mkdir()
    done = rath_process("migrate", env={"HOME": str(user_home)}, cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert (user_home / ".rath" / "rath.db").is_file() and not (elsewhere / ".rath").exists()


WORKFLOW_SYNTAX_ERROR = "from runtime import Workflow\n\nclass Broken(Workflow:\n    pass\n"
WORKFLOW_IMPORT_ERROR = "import a_module_nobody_has\n"
WORKFLOW_RAISES = "raise RuntimeError('configuration missing\\nsecond line')\n"


@pytest.mark.parametrize(
    ("source", "says"),
    [
        (WORKFLOW_SYNTAX_ERROR, "SyntaxError"),
        (WORKFLOW_IMPORT_ERROR, "No module named 'a_module_nobody_has'"),
        (WORKFLOW_RAISES, "RuntimeError: configuration missing second line"),
    ],
)
def test_serve_with_a_workflow_file_that_fails_to_import_says_so_in_one_line(
    source: str, says: str, tmp_path: Path
) -> None:
    flows = tmp_path / "flows.py"
    flows.write_text(source)
    done = rath_process("serve", "--home", str(tmp_path / "home"), "--workflows", str(flows))
    line = one_error_line(done.stderr)
    assert done.returncode == 1 and done.stdout == ""
    assert f"could not load workflows from {flows}" in line and says in line


def test_serve_with_a_home_that_is_a_file_or_a_port_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("not a directory")
    done = rath_process("serve", "--home", str(a_file))
    assert done.returncode == 1 and "is a file, not a directory" in one_error_line(done.stderr)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = rath_process("serve", "--transport", "http", "--port", str(port), "--home", str(tmp_path / "h"))
    line = one_error_line(done.stderr)
    assert done.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in line and "--port" in line
    assert not (tmp_path / "h").exists()  # refused before the store was opened
