"""Choosing a store by URL: the accepted forms, clear one-line errors, and ``--store`` / ``$RATH_STORE`` on the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from runtime import InvalidInputError, Runtime
from runtime.errors import StoreError
from runtime.store import BACKENDS, backend_module, default_url, parse_store_url, redact, resolve_store

pytestmark = pytest.mark.anyio


def test_sqlite_urls_name_an_absolute_file_and_the_default_is_rath_db_under_the_home(tmp_path: Path) -> None:
    url = parse_store_url(f"sqlite://{tmp_path}/x.db")
    assert url.scheme == "sqlite" and url.path == tmp_path / "x.db" and url.url == f"sqlite://{tmp_path}/x.db"
    assert parse_store_url(f"sqlite:///{tmp_path}/x.db").path == tmp_path / "x.db"  # four slashes work too
    assert resolve_store(None, tmp_path) == default_url(tmp_path)
    assert default_url(tmp_path).path == tmp_path / "rath.db"
    for bad in ("sqlite://relative.db", "sqlite:///", "sqlite:///tmp/x.db?mode=ro", "sqlite:x.db"):
        with pytest.raises(InvalidInputError, match="sqlite:///ABSOLUTE/PATH"):
            parse_store_url(bad)


@pytest.mark.parametrize("bad", ["", "rath.db", "/abs/rath.db", "mysql://h/db", "http://x", "postgresql://"])
def test_a_url_of_no_known_form_is_refused_naming_the_forms(bad: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_store_url(bad)
    message = str(caught.value)
    assert "\n" not in message and ("postgresql://user@host:port/dbname" in message)


async def test_postgresql_is_built_in_and_its_password_is_never_shown() -> None:
    url = parse_store_url("postgresql://rath:s3cret@127.0.0.1:1/rath")  # port 1: nothing listens there
    assert url.scheme == "postgresql" and "s3cret" not in str(url)
    assert parse_store_url("postgres://rath@db.internal/rath").scheme == "postgresql"
    assert BACKENDS["postgresql"] == "runtime.store.postgres.backend"
    module = backend_module(url)
    with pytest.raises(StoreError, match="unreachable") as caught:
        await module.pending(url)
    assert "s3cret" not in str(caught.value) and "\n" not in str(caught.value)
    assert (
        redact("postgresql://u:p@h/d") == "postgresql://u:***@h/d"
        and redact("postgresql://u@h/d") == "postgresql://u@h/d"
    )


async def test_runtime_open_uses_the_store_it_is_given(tmp_path: Path) -> None:
    elsewhere = tmp_path / "data" / "state.db"
    async with Runtime.open(tmp_path / "home", store=f"sqlite://{elsewhere}", workers=0) as rt:
        made = await rt.sessions.create([{"kind": "user", "content": "here"}])
    assert elsewhere.is_file() and not (tmp_path / "home" / "rath.db").exists()
    async with Runtime.open(tmp_path / "other-home", store=f"sqlite://{elsewhere}", workers=0) as rt:
        assert (await rt.sessions.info(made.id)).length == 1
    with pytest.raises(StoreError, match="unreachable"):  # port 1: no PostgreSQL there
        async with Runtime.open(tmp_path / "home", store="postgresql://u@127.0.0.1:1/db", workers=0):
            pass


async def rath(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    environ = {k: v for k, v in os.environ.items() if k not in ("RATH_HOME", "RATH_STORE")} | (env or {})
    return await anyio.run_process([sys.executable, "-m", "rath_mcp", *args], check=False, env=environ)


async def test_the_cli_takes_store_from_the_flag_or_the_environment(tmp_path: Path) -> None:
    home, db = tmp_path / "home", tmp_path / "store" / "rath-elsewhere.db"
    done = await rath("migrate", "--home", str(home), "--store", f"sqlite://{db}")
    assert done.returncode == 0 and db.is_file() and not (home / "rath.db").exists(), done.stderr
    check = await rath("migrate", "--check", "--home", str(home), env={"RATH_STORE": f"sqlite://{db}"})
    assert check.returncode == 0 and b"up to date" in check.stdout
    async with Runtime.open(home, store=f"sqlite://{db}", workers=0) as rt:
        made = await rt.sessions.create([{"kind": "user", "content": "from the shell"}])
    listed = await rath("sessions", "list", "--home", str(home), env={"RATH_STORE": f"sqlite://{db}"})
    assert listed.returncode == 0 and made.id.encode() in listed.stdout
    runs = await rath("runs", "list", "--home", str(home), "--store", f"sqlite://{db}")
    assert runs.returncode == 0, runs.stderr


@pytest.mark.parametrize(
    ("store", "says"),
    [
        ("postgresql://rath:s3cret@127.0.0.1:1/rath", "is unreachable"),  # port 1: no PostgreSQL there
        ("mysql://h/db", "sqlite:///ABSOLUTE/PATH.db or postgresql://user@host:port/dbname"),
        ("sqlite://relative.db", "absolute database file"),
    ],
)
@pytest.mark.parametrize("command", [["serve"], ["worker"], ["migrate"], ["runs", "list"], ["sessions", "list"]])
async def test_a_bad_or_unavailable_store_is_one_line_on_stderr(
    tmp_path: Path, store: str, says: str, command: list[str]
) -> None:
    done = await rath(*command, "--home", str(tmp_path / "home"), "--store", store)
    # an inspection command first says which store it reads (a note, not part of the error)
    lines = [line for line in done.stderr.decode().strip().splitlines() if "reading the store" not in line]
    assert done.returncode != 0 and len(lines) == 1 and says in lines[0], done.stderr
    assert "s3cret" not in done.stderr.decode() and not (tmp_path / "home" / "rath.db").exists()
