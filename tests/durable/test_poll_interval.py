"""The fallback poll interval: ``Runtime.open(poll_s=)``, else ``$RATH_POLL_S``, else 0.25 s; a bad value
is a plain error before anything is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import InvalidInputError, Runtime
from runtime.durable.service import POLL_S

pytestmark = pytest.mark.anyio


async def test_the_poll_interval_comes_from_the_argument_else_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RATH_POLL_S", raising=False)
    async with Runtime.open(tmp_path, workers=0) as rt:
        assert rt.runs.poll_s == POLL_S
    monkeypatch.setenv("RATH_POLL_S", "3600")
    async with Runtime.open(tmp_path, workers=0) as rt:
        assert rt.runs.poll_s == 3600.0
    async with Runtime.open(tmp_path, workers=0, poll_s=0.5) as rt:
        assert rt.runs.poll_s == 0.5


@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf"])
async def test_a_bad_poll_interval_is_refused_before_the_store_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("RATH_POLL_S", value)
    with pytest.raises(InvalidInputError, match="seconds"):
        async with Runtime.open(tmp_path / "home", workers=0):
            pass
    assert not (tmp_path / "home" / "rath.db").exists()
