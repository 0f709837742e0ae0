"""Memory tools and the memory resource through a real MCP client, in both protocol eras."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from mcp_types import TextResourceContents

from tests.mcp.conftest import call, call_error

pytestmark = pytest.mark.anyio


async def test_memory_remember_returns_an_id_and_a_memory_uri(client: Client) -> None:
    item = await call(
        client, "memory_remember", content="The deploy key lives in vault.", path="ops/deploy", tags=["ops"]
    )
    assert item["memory_id"].startswith("mem_") and item["uri"] == "memory://user/ops/deploy"
    assert item["tags"] == ["ops"]


async def test_memory_recall_ranks_best_first_and_only_returns_matches(client: Client) -> None:
    await call(client, "memory_remember", content="Postgres backups run nightly at two.")
    await call(client, "memory_remember", content="Backups of postgres are kept for thirty days; postgres is v16.")
    await call(client, "memory_remember", content="The cafeteria serves soup on Fridays.")
    found = await call(client, "memory_recall", query="postgres backups", k=5)
    hits = found["hits"]
    assert len(hits) == 2 and all(h["score"] > 0 for h in hits)
    assert hits[0]["score"] >= hits[1]["score"]
    assert all("soup" not in h["snippet"] for h in hits)
    assert (await call(client, "memory_recall", query="kubernetes"))["hits"] == []


async def test_memory_recall_can_be_limited_to_one_scope(client: Client) -> None:
    await call(client, "memory_remember", content="agent note about rivers", scope="agent")
    await call(client, "memory_remember", content="user note about rivers", scope="user")
    hits = (await call(client, "memory_recall", query="rivers", scope="agent"))["hits"]
    assert [h["uri"].split("/")[2] for h in hits] == ["agent"]


async def test_memory_commit_archives_the_transcript_of_a_session(client: Client) -> None:
    sid = (await call(client, "session_create", message="Remember that my favourite colour is teal."))["session_id"]
    committed = await call(client, "memory_commit", session_id=sid)
    assert committed["archived_uri"] == f"memory://session/{sid}/transcript"
    assert committed["extracted_count"] == len(committed["extracted_uris"])
    hits = (await call(client, "memory_recall", query="teal"))["hits"]
    assert any(h["uri"] == committed["archived_uri"] for h in hits)


async def test_memory_forget_by_id_or_uri_deletes_and_reports_how_many(client: Client) -> None:
    a = await call(client, "memory_remember", content="forget me by id")
    b = await call(client, "memory_remember", content="forget me by uri", path="tmp/b")
    assert (await call(client, "memory_forget", memory_id=a["memory_id"]))["deleted"] == 1
    assert (await call(client, "memory_forget", uri=b["uri"]))["deleted"] == 1
    assert (await call(client, "memory_forget", uri=b["uri"]))["deleted"] == 0
    assert (await call(client, "memory_recall", query="forget"))["hits"] == []


async def test_memory_forget_needs_exactly_one_of_id_or_uri(client: Client) -> None:
    assert "exactly one" in await call_error(client, "memory_forget")


async def test_bad_memory_input_says_what_to_fix(client: Client) -> None:
    assert "scope" in await call_error(client, "memory_remember", content="x", scope="galaxy")
    assert "non-empty query" in await call_error(client, "memory_recall", query="   ")


async def test_memory_resource_returns_the_item_with_its_content(client: Client) -> None:
    item = await call(client, "memory_remember", content="resource body", tags=["t"])
    contents = (await client.read_resource(f"rath://memory/{item['memory_id']}")).contents
    assert isinstance(contents[0], TextResourceContents)
    body = json.loads(contents[0].text)
    assert body["content"] == "resource body" and body["uri"] == item["uri"] and body["tags"] == ["t"]


async def test_memory_list_browses_the_tree_by_prefix_with_counts_and_pages(client: Client) -> None:
    for path in ("notes/a", "notes/b", "notes/deep/c", "top"):
        await call(client, "memory_remember", content=f"item {path}", path=path)
    await call(client, "memory_remember", content="an agent's note", scope="agent", path="x")
    root = await call(client, "memory_list")
    assert root["items"] == [] and root["next_cursor"] is None
    assert root["children"] == [{"prefix": "memory://agent/", "count": 1}, {"prefix": "memory://user/", "count": 4}]
    user = await call(client, "memory_list", prefix="memory://user/", limit=1)
    assert user["children"] == [{"prefix": "memory://user/notes/", "count": 3}] and user["items"] == []
    rest = await call(client, "memory_list", prefix="memory://user/", cursor=user["next_cursor"])
    assert [i["uri"] for i in rest["items"]] == ["memory://user/top"] and rest["next_cursor"] is None
    assert rest["items"][0]["preview"] == "item top"
    notes = await call(client, "memory_list", prefix="memory://user/notes/")
    assert [i["uri"] for i in notes["items"]] == ["memory://user/notes/a", "memory://user/notes/b"]
    assert notes["children"] == [{"prefix": "memory://user/notes/deep/", "count": 1}]
    agent = (await call(client, "memory_list", prefix="memory://agent/"))["items"][0]["memory_id"]
    assert "cursor" in await call_error(client, "memory_list", prefix="memory://user/", cursor=agent)
