"""What a new user meets first, each through ``rath-mcp`` run as a real process: a missing extra named
in one line, the commands listed, a mistyped option corrected, the URLs a server prints, what a
``--workers 0`` server says of a queued run, what a worker says it works on, and 401 headers in ASCII."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rath_mcp.cli import build_parser
from runtime.extras import EXTRAS, MissingExtraError, require_extra
from tests.cli.conftest import ROOT, one_error_line, rath_process
from tests.cli.serving import clean_env, rath_argv, running

#: ``rath-mcp ARGV`` in a Python where ``import asyncpg`` fails as it does without the postgres extra.
WITHOUT_ASYNCPG = "import sys; sys.modules['asyncpg'] = None; from rath_mcp.__main__ import main; sys.exit(main())"
STORE = "postgresql://rath:s3cret-pw@127.0.0.1:5432/rath"


@pytest.mark.parametrize(
    "argv",
    [["migrate"], ["migrate", "--check"], ["serve", "--workers", "0"], ["worker"], ["runs", "list"]],
    ids=" ".join,
)
def test_a_postgresql_store_without_the_extra_names_the_extra_in_one_line(argv: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_ASYNCPG, *argv, "--store", STORE, "--home", str(tmp_path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=120,
        check=False,
    )
    line = one_error_line(done.stderr)
    assert done.returncode == 1 and done.stdout == ""
    assert line.startswith("rath-mcp: error: the PostgreSQL store") and "'postgres' extra" in line, line
    assert line.endswith("pip install 'rath-mcp[postgres]'"), line
    assert "unexpected" not in line and "bug" not in line and "s3cret" not in done.stderr


def test_every_extra_has_the_words_of_its_error_and_an_absent_module_names_its_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras) - {"test"} == set(EXTRAS), "runtime/extras.py EXTRAS lists every extra but test"
    with pytest.raises(MissingExtraError, match=r"pip install 'rath-mcp\[postgres\]'$"):
        require_extra("rath_no_such_module.inner", "postgres")
    assert require_extra("json", "postgres").__name__ == "json"  # present: the module itself


def test_bare_rath_mcp_lists_every_command_one_line_each() -> None:
    done = rath_process()
    assert done.returncode == 2 and done.stdout == ""
    one_error_line(done.stderr)
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    listed = {line.split()[0]: line for line in done.stderr.splitlines() if line.startswith("  ")}
    assert set(listed) == set(commands), done.stderr
    assert "run the MCP server" in listed["serve"]


def test_a_mistyped_option_names_the_option_meant_and_the_commands_help() -> None:
    done = rath_process("serve", "--prot", "8765")
    line = one_error_line(done.stderr)
    assert done.returncode == 2 and done.stdout == ""
    assert "--prot 8765" in line and "did you mean --port?" in line, line
    assert "`rath-mcp serve --help`" in line, line
    nested = one_error_line(rath_process("runs", "list", "--stauts", "waiting").stderr)
    assert "did you mean --status?" in nested and "`rath-mcp runs list --help`" in nested, nested


@pytest.mark.anyio
async def test_an_http_server_prints_its_mcp_and_ui_urls_and_both_answer(tmp_path: Path) -> None:
    argv = rath_argv("serve", "--transport", "http", "--port", "0", "--home", str(tmp_path))
    async with running(argv) as server, httpx2.AsyncClient() as http:
        mcp_url, ui_url = await server.url("/mcp"), await server.url("/ui")
        assert ui_url == mcp_url.removesuffix("/mcp") + "/ui"
        page = await http.get(ui_url)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "rath-mcp" in page.text
        async with Client(mcp_url) as client:
            assert "run_get" in {tool.name for tool in (await client.list_tools()).tools}


@pytest.mark.anyio
async def test_a_server_with_no_workers_says_a_queued_run_needs_a_worker_elsewhere(tmp_path: Path) -> None:
    argv = rath_argv("serve", "--workers", "0", "--home", str(tmp_path))
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=clean_env())
    with anyio.fail_after(60):
        async with Client(params) as client:
            started = await client.call_tool("run_start", {"workflow": "echo", "message": "hi"})
            assert started.structured_content is not None, started.content
            run = started.structured_content
    assert run["status"] == "queued"
    assert "this server drives no runs" in run["hint"] and "--workers 0" in run["hint"], run["hint"]
    assert "rath-mcp worker" in run["hint"] and f"run_wait with run_id={run['run_id']}" in run["hint"]


@pytest.mark.anyio
async def test_a_worker_names_the_store_it_works_on(tmp_path: Path) -> None:
    async with running(rath_argv("worker", "--home", str(tmp_path))) as worker:
        said = await worker.line_with(r"worker on the store (\S+) with 4 slot\(s\)")
    assert said.group(1) == str(tmp_path / "rath.db")


@pytest.mark.anyio
async def test_a_401_header_is_ascii_and_keeps_the_words_of_its_description(tmp_path: Path) -> None:
    argv = rath_argv("serve", "--transport", "http", "--port", "0", "--auth", "token", "--home", str(tmp_path))
    async with running(argv) as server:
        url = httpx2.URL(await server.url("/mcp"))
        request = (
            f"POST /mcp HTTP/1.1\r\nHost: {url.host}:{url.port}\r\nAuthorization: Bearer not-a-rath-token\r\n"
            "Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        )
        with anyio.fail_after(30):
            async with await anyio.connect_tcp(url.host, url.port) as stream:
                await stream.send(request.encode())
                raw = b""
                try:
                    while True:
                        raw += await stream.receive()
                except anyio.EndOfStream:
                    pass
    head = raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    assert head[0].startswith(b"HTTP/1.1 401"), head
    (challenge,) = [line for line in head if line.lower().startswith(b"www-authenticate:")]
    assert challenge.isascii(), challenge
    assert b'error="invalid_token"' in challenge
    assert b"not a rath-mcp token (rath.tok_ID.SECRET)" in challenge, challenge
    assert b"?" not in challenge.split(b"error_description=", 1)[1], challenge
