"""Fixtures for the agent layer: a real local sandbox and a provider that records what it was asked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.providers.base import DeltaCallback, ModelRequest, ModelResponse, Provider
from runtime.sandbox.local import LocalBackend, LocalSandbox


class Recording:
    """A provider wrapper (a real ``Provider``) that keeps every request it passed on."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, *, on_delta: DeltaCallback | None = None) -> ModelResponse:
        self.requests.append(request)
        return await self.inner.complete(request, on_delta=on_delta)


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[LocalSandbox]:
    box = await LocalBackend(tmp_path / "sandboxes").open("agent-ws")
    yield box
    await box.close()
