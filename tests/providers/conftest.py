"""Fixtures: a real local model server speaking the OpenAI and Anthropic wire formats."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.model_server import FakeModelServer, serve


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    with serve(FakeModelServer()) as server:
        yield server
