"""``rath-mcp serve --tenant T --project P``: the scope of the local caller (stdio, ``--auth none``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from runtime import NotFoundError, Runtime
from tests.mcp.conftest import call

pytestmark = pytest.mark.anyio


async def test_a_stdio_server_works_in_the_scope_serve_was_given(tmp_path: Path) -> None:
    home = tmp_path / "home"
    argv = ["-m", "rath_mcp", "serve", "--home", str(home), "--tenant", "acme", "--project", "alpha", "--workers", "1"]
    async with Client(StdioServerParameters(command=sys.executable, args=argv), mode="legacy") as client:
        made = await call(client, "session_create", message="in acme/alpha")
        run = await call(client, "run_start", workflow="echo", session_id=made["session_id"], wait_s=20)
        assert run["status"] == "succeeded"
    async with Runtime.open(home, workers=0) as rt:
        assert (await rt.scoped("acme", "alpha").sessions.info(made["session_id"])).id == made["session_id"]
        assert (await rt.scoped("acme", "alpha").runs.get(run["run_id"])).status == "succeeded"
        with pytest.raises(NotFoundError):
            await rt.sessions.info(made["session_id"])  # not in the default local/default


def test_a_scope_name_that_is_not_one_is_a_usage_error_in_one_line(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "rath_mcp", "serve", "--home", str(tmp_path), "--project", "../up"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "project '../up'" in done.stderr
    assert not any(tmp_path.iterdir())  # nothing written
