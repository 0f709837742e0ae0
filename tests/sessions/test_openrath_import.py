"""Sessions saved by the real OpenRath 2.0.0 (its own environment: it needs mcp<2) imported here.

``openrath_save.py`` runs with ``.openrath-venv``'s Python (``.ci/run`` makes it) and saves, with
OpenRath's ``SessionWriter``, a conversation holding every chunk kind, an assistant turn with two tool
calls and their results, and usage; and a fork of it that goes on. ``rath-mcp sessions import`` then
reads the folder.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from rath_mcp.server import build_server
from runtime import Runtime
from runtime.sessions.openrath import session_id_of
from tests.doc_text import ROOT
from tests.mcp.conftest import call
from tests.needs import unavailable

pytestmark = pytest.mark.anyio
OPENRATH_PYTHON = ROOT / ".openrath-venv" / "bin" / "python"
SAVER = Path(__file__).with_name("openrath_save.py")


@pytest.fixture(scope="module")
def openrath_saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Sessions the real package saved (once for the module), and their OpenRath ids."""
    if not OPENRATH_PYTHON.is_file():
        unavailable(
            "the OpenRath 2.0.0 environment",
            "python3 -m venv .openrath-venv && .openrath-venv/bin/pip install openrath==2.0.0",
        )
    out = tmp_path_factory.mktemp("openrath") / "sessions"
    done = subprocess.run([str(OPENRATH_PYTHON), str(SAVER), str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return out, json.loads(done.stdout)


@pytest.fixture
def save_with_openrath(openrath_saved: tuple[Path, dict[str, str]]) -> Any:
    """``save(out)``: a copy of those sessions in ``out`` (each test may change its own); their ids."""

    def save(out: Path) -> dict[str, str]:
        shutil.copytree(openrath_saved[0], out)
        return dict(openrath_saved[1])

    return save


def rath_mcp(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rath_mcp", *argv], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def import_files(home: Path, *paths: Path | str) -> subprocess.CompletedProcess[str]:
    return rath_mcp("sessions", "import", *map(str, paths), "--home", str(home))


async def test_a_folder_of_openrath_sessions_keeps_chunks_tool_calls_usage_and_the_fork(
    tmp_path: Path, save_with_openrath: Any
) -> None:
    ids = save_with_openrath(tmp_path / "sessions")
    root, fork = session_id_of(ids["root"]), session_id_of(ids["fork"])
    home = tmp_path / "home"
    done = import_files(home, tmp_path / "sessions")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("imported") for line in lines), lines
    assert f"-> {root} (6 chunks, OpenRath {ids['root']}, 150 tokens)" in lines[0]  # the parent first
    assert f"-> {fork} (8 chunks, OpenRath {ids['fork']}, parents {root}, 240 tokens)" in lines[1]

    async with Runtime.open(home, workers=0) as rt:
        first = await rt.sessions.get(root)
        assert first.info.op == "import" and first.info.parents == ()
        assert [c.kind for c in first.chunks] == [
            "system",
            "user",
            "assistant",
            "tool_result",
            "tool_result",
            "assistant",
        ]
        assert {c.trust for c in first.chunks} == {"external"}
        turn = first.chunks[2]
        assert turn.content == "Let me look."
        calls = [(tc.id, tc.function.name, json.loads(tc.function.arguments)) for tc in turn.tool_calls or ()]
        assert calls == [("call_a", "read_file", {"path": "notes.txt"}), ("call_b", "stat", {"path": "notes.txt"})]
        assert (first.chunks[3].tool_call_id, first.chunks[3].name, first.chunks[3].content) == (
            "call_a",
            "read_file",
            "buy milk",
        )
        assert (first.info.usage.prompt_tokens, first.info.usage.completion_tokens) == (120, 30)
        assert first.info.metadata["openrath"]["id"] == ids["root"]

        second = await rt.sessions.get(fork)
        assert second.info.parents == (root,) and second.info.usage.total_tokens == 240
        assert second.info.metadata["openrath"]["lineage_operator"] == "Session.fork"
        assert second.chunks[-1].content == "Acheter du lait."
        shared = await rt.sessions.store.uids(root)
        assert (await rt.sessions.store.uids(fork))[:6] == shared  # the fork's copy is the parent's history
        graph = await rt.sessions.lineage(fork)
        assert [(e.parent, e.child) for e in graph.edges] == [(root, fork)]

    again = import_files(home, tmp_path / "sessions")
    assert again.returncode == 0 and [line.split()[0] for line in again.stdout.splitlines()] == ["unchanged"] * 2


async def test_a_fork_imported_before_its_parent_is_linked_when_the_parent_comes(
    tmp_path: Path, save_with_openrath: Any
) -> None:
    ids = save_with_openrath(tmp_path / "sessions")
    root, fork = session_id_of(ids["root"]), session_id_of(ids["fork"])
    home = tmp_path / "home"
    assert import_files(home, tmp_path / "sessions" / f"{ids['fork']}.jsonl").returncode == 0
    assert import_files(home, tmp_path / "sessions" / f"{ids['root']}.jsonl").returncode == 0
    async with Runtime.open(home, workers=0) as rt:
        assert (await rt.sessions.info(fork)).parents == (root,)
        assert (await rt.sessions.get(root)).info.length == 6
        graph = await rt.sessions.lineage(root)
        assert [(e.parent, e.child) for e in graph.edges] == [(root, fork)]


def corrupt(path: Path, line_no: int, text: str) -> None:
    lines = path.read_text().splitlines()
    lines[line_no - 1] = text
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("line_no", "text", "says"),
    [
        (3, '{"record_type": "chunk", "index": 1, "kind": "user"', "line 3: not valid JSON"),
        (4, '{"record_type": "chunk", "index": 2, "kind": "robot", "payload": {}}', "line 4: chunk kind 'robot'"),
        (
            5,
            '{"record_type": "chunk", "index": 9, "kind": "user", "payload": {"content": "x"}}',
            "line 5: chunk index 9",
        ),
        (
            1,
            '{"record_type": "header", "schema_version": 2, "id": "x"}',
            "line 1: schema_version 2: this reads version 1",
        ),
        (8, '{"record_type": "trailer", "final_chunk_count": 5}', "line 8: the trailer counts 5 chunks"),
    ],
)
async def test_a_malformed_file_is_an_error_naming_its_line_and_nothing_is_imported(
    tmp_path: Path, save_with_openrath: Any, line_no: int, text: str, says: str
) -> None:
    ids = save_with_openrath(tmp_path / "sessions")
    bad = tmp_path / "sessions" / f"{ids['root']}.jsonl"
    corrupt(bad, line_no, text)
    home = tmp_path / "home"
    done = import_files(home, bad)
    assert done.returncode == 1
    [line] = done.stdout.splitlines()
    assert line.startswith(f"failed    {bad}: {bad} {says}"), line
    async with Runtime.open(home, workers=0) as rt:
        page, _ = await rt.sessions.page(None, 10)
        assert page == []  # nothing half-imported


async def test_foreign_jsonl_fails_its_own_line_and_the_others_are_imported(
    tmp_path: Path, save_with_openrath: Any
) -> None:
    ids = save_with_openrath(tmp_path / "sessions")
    (tmp_path / "sessions" / "events.jsonl").write_text('{"event": "click", "at": 1}\n')
    done = import_files(tmp_path / "home", tmp_path / "sessions")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    [failed] = [line for line in lines if line.startswith("failed")]
    assert "events.jsonl: line 1 of the JSONL: each line must be a JSON object with a 'type'" in failed
    imported = [line for line in lines if line.startswith("imported")]
    assert [ids["root"] in imported[0], ids["fork"] in imported[1]] == [True, True]


async def test_session_import_over_mcp_reads_an_openrath_file(tmp_path: Path, save_with_openrath: Any) -> None:
    ids = save_with_openrath(tmp_path / "sessions")
    text = (tmp_path / "sessions" / f"{ids['root']}.jsonl").read_text()
    async with Runtime.open(tmp_path / "home", workers=0) as rt, Client(build_server(rt)) as client:
        made: dict[str, Any] = await call(client, "session_import", jsonl=text)
        assert made["session_id"] == session_id_of(ids["root"])
        got = await call(client, "session_get", session_id=made["session_id"])
        assert [c["trust"] for c in got["chunks"]] == ["external"] * 6
