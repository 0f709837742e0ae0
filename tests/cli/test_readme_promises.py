"""What the docs tell a new user to type does what it says, run as real processes.

- docs/team.md "Run on PostgreSQL": its install line names the extra; its migrate, serve (``--workers 0``) and
  worker lines, pointed at a real PostgreSQL, migrate the store, serve a run that waits (saying it
  needs a worker) and drive it to the end in a worker that names its store, password redacted.
- docs/team.md "Serve a team": the token its ``token create`` line makes can start an approval run and approve it.
- docs/getting-started.md "Examples": state goes where it says when ``RATH_HOME`` is not set.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests import pg
from tests.cli.conftest import ROOT
from tests.cli.serving import clean_env, rath_argv, running
from tests.doc_text import DOCS, section

README_URL = "postgresql://rath@db.internal:5432/rath"
GETTING_STARTED, TEAM = DOCS / "getting-started.md", DOCS / "team.md"


def block_of(page: Path, title: str) -> list[str]:
    """The lines of the first fenced block of a section of ``page``, comment lines left out."""
    block = section(page, title).split("```\n", 2)[1]
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def argv_of(line: str, *replace: tuple[str, str]) -> list[str]:
    """A README ``rath-mcp …`` line (its comment cut) as this interpreter runs it."""
    command = line.split("#", 1)[0]
    for old, new in replace:
        command = command.replace(old, new)
    words = shlex.split(command)
    assert words[0] == "rath-mcp", line
    return rath_argv(*words[1:])


def with_password(url: str) -> tuple[str, str]:
    """``url`` with a password in it (trust authentication ignores it), and that password."""
    parts = urlsplit(url)
    if parts.password:
        return url, parts.password
    netloc = f"{parts.username or 'postgres'}:readme-secret-pw@{parts.hostname}:{parts.port or 5432}"
    return urlunsplit(parts._replace(netloc=netloc)), "readme-secret-pw"


@pytest.fixture
def pg_store(pg_database: str) -> str:
    """A PostgreSQL store URL of a schema of its own (nothing migrated yet)."""
    return pg.url(pg_database, search_path=asyncio.run(pg.create_schema(pg_database)))


def test_the_postgresql_section_runs_as_written(pg_store: str, tmp_path: Path) -> None:
    install, migrate, serve, worker = block_of(TEAM, "Run on PostgreSQL")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert shlex.split(install.split("#")[0]) == [".venv/bin/pip", "install", "-e", ".[postgres]"], install
    assert "pip install 'rath-mcp[postgres]'" in install and "asyncpg>=0.29" in extras["postgres"]
    assert "pip install 'rath-mcp[postgres]'" in section(GETTING_STARTED, "Install")
    assert "not in this build" not in section(GETTING_STARTED, "Install")

    url, password = with_password(pg_store)
    home = ("--home", str(tmp_path / "home"))
    migrated = subprocess.run(
        [*argv_of(migrate, (README_URL, url)), *home], capture_output=True, text=True, env=clean_env(), check=False
    )
    assert migrated.returncode == 0 and "migration(s) applied" in migrated.stdout, migrated.stderr
    checked = subprocess.run(
        rath_argv("migrate", "--check", "--store", url, *home), capture_output=True, text=True, env=clean_env()
    )
    assert checked.returncode == 0 and "is up to date" in checked.stdout, checked.stderr
    assert checked.stderr.strip() == f"rath-mcp: reading the store {url.replace(password, '***')}"
    anyio.run(serve_then_work, argv_of(serve, (README_URL, url)), argv_of(worker, (README_URL, url)), tmp_path, url)


async def serve_then_work(serve: list[str], worker: list[str], tmp_path: Path, url: str) -> None:
    password = urlsplit(url).password or ""
    async with (
        running([*serve, "--port", "0", "--home", str(tmp_path / "server")]) as server,
        Client(await server.url("/mcp")) as client,
    ):
        started = await client.call_tool("run_start", {"workflow": "echo", "message": "from the README"})
        run = started.structured_content
        assert run is not None and run["status"] == "queued", started.content
        assert "this server drives no runs" in run["hint"], run["hint"]
        async with running([*worker, "--home", str(tmp_path / "worker")]) as working:
            said = await working.line_with(r"worker on the store (\S+) with 8 slot\(s\)")
            assert said.group(1) == url.replace(password, "***"), said.group(0)
            waited = await client.call_tool("run_wait", {"run_id": run["run_id"], "timeout_s": 50})
            assert waited.structured_content is not None, waited.content
            assert waited.structured_content["status"] == "succeeded", waited.structured_content
        assert not any(password in line for line in [*server.lines, *working.lines])


def test_the_team_token_can_approve_the_run_it_starts(tmp_path: Path) -> None:
    create, serve, *_ = block_of(TEAM, "Serve a team: tokens, OAuth, audit, health and metrics")
    home = ("--home", str(tmp_path))
    made = subprocess.run([*argv_of(create), *home], capture_output=True, text=True, env=clean_env(), check=False)
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip().splitlines()[-1]
    argv = [*argv_of(serve), "--host", "127.0.0.1", "--port", "0", *home]  # loopback, a free port
    assert "--auth" in argv and argv[argv.index("--auth") + 1] == "token"
    anyio.run(start_and_approve, argv, secret)


async def start_and_approve(serve: list[str], secret: str) -> None:
    async with (
        running(serve) as server,
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60) as http,
        Client(streamable_http_client(await server.url("/mcp"), http_client=http)) as client,
    ):
        started = await client.call_tool("run_start", {"workflow": "approval", "message": "ship it", "wait_s": 20})
        run = started.structured_content
        assert run is not None and run["status"] == "waiting", started.content
        interrupt_id = run["pending_interrupts"][0]["interrupt_id"]
        decided = await client.call_tool("interrupt_resolve", {"interrupt_id": interrupt_id, "action": "approve"})
        assert not decided.is_error, decided.content
        waited = await client.call_tool("run_wait", {"run_id": run["run_id"], "timeout_s": 50})
        assert waited.structured_content is not None and waited.structured_content["status"] == "succeeded"


def test_examples_keep_state_where_the_readme_and_their_docstrings_say(tmp_path: Path) -> None:
    stated = re.search(r"State goes to `\$RATH_HOME`, else `([^`]+)`", section(GETTING_STARTED, "Examples"))
    assert stated, "the Examples section of docs/getting-started.md says where state goes"
    for example in sorted((ROOT / "examples").glob("*.py")):
        said = re.search(r"\(state goes to \$RATH_HOME, else (\S+)\)", example.read_text())
        assert said is None or said.group(1) == stated.group(1), f"{example.name} says {said.group(1)}"
    user, cwd = tmp_path / "user", tmp_path / "cwd"
    user.mkdir(), cwd.mkdir()
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "sessions_fork_merge.py")],
        cwd=cwd,
        env=clean_env(HOME=str(user)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    where = Path(stated.group(1).replace("~", str(user), 1))
    where = where if where.is_absolute() else cwd / where
    assert (where / "rath.db").is_file(), f"no store at {where}, where the README says state goes"
    assert sorted(p.name for p in cwd.iterdir()) == [], "nothing is written in the working directory"
