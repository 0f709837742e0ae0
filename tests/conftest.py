"""Shared fixtures. Tests run on asyncio through anyio's pytest plugin (``@pytest.mark.anyio``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime import Runtime


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh runtime home directory."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
async def rt(home: Path) -> AsyncIterator[Runtime]:
    """A runtime opened on a fresh home (default tenant/project)."""
    async with Runtime.open(home) as runtime:
        yield runtime
