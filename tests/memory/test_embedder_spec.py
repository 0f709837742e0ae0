"""Which embedder a server uses (CONTRACT §13): ``--embedder``, else config.json ``memory.embedder``,
else ``local`` when its extra is installed; a wrong name is one line naming the choices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.errors import UsageError
from runtime.memory.embed import default_spec, local_available, resolve_spec


def test_the_flag_wins_then_config_json_then_the_default(tmp_path: Path) -> None:
    assert resolve_spec(None, tmp_path) == default_spec() == ("local" if local_available() else "none")
    (tmp_path / "config.json").write_text(json.dumps({"memory": {"embedder": "openai:text-embedding-3-large"}}))
    assert resolve_spec(None, tmp_path) == "openai:text-embedding-3-large"
    assert resolve_spec("none", tmp_path) == "none"


@pytest.mark.parametrize("bad", ["bert", "openai:", "local:big", ""])
def test_a_wrong_name_says_what_is_accepted(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UsageError, match="must be local, openai, openai:MODEL or none"):
        resolve_spec(bad, tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"memory": {"embedder": 3}}))
    with pytest.raises(UsageError, match=r"config\.json memory\.embedder must be"):
        resolve_spec(None, tmp_path)
