"""Items: URIs, replace-at-URI, read/list/forget, tenant and project isolation, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import InvalidInputError, NotFoundError, Runtime

pytestmark = pytest.mark.anyio


async def test_remember_at_a_path_and_read_it_back(rt: Runtime) -> None:
    item = await rt.memory.remember(
        "Prefers dark mode", scope="user", path="prefs/editor", tags=["ui", "prefs"], source="ses_x"
    )
    assert item.uri == "memory://user/prefs/editor"
    assert item.id.startswith("mem_") and item.scope == "user"
    assert (item.tenant, item.project, item.source) == ("local", "default", "ses_x")
    assert await rt.memory.read("memory://user/prefs/editor") == item
    assert await rt.memory.get(item.id) == item
    assert item.public()["tags"] == ["ui", "prefs"]


async def test_remembering_at_an_existing_uri_replaces_the_item_and_keeps_its_id(rt: Runtime) -> None:
    first = await rt.memory.remember("editor is vim", path="prefs/editor")
    second = await rt.memory.remember("editor is helix", path="prefs/editor", tags=["changed"])
    assert second.id == first.id and second.created_at == first.created_at
    assert second.updated_at >= first.updated_at
    assert (await rt.memory.read(first.uri)).content == "editor is helix"
    assert await rt.memory.recall("vim") == []  # the old text is out of the index
    assert [h.memory_id for h in await rt.memory.recall("helix")] == [first.id]
    assert [h.memory_id for h in await rt.memory.recall("changed")] == [first.id]  # tags are searchable
    assert len(await rt.memory.list()) == 1


@pytest.mark.parametrize(
    ("scope", "path", "message"),
    [
        ("global", "x", "not one of"),
        ("user", "", "1 to 512"),
        ("user", "a//b", "empty segment"),
        ("user", "/a", "empty segment"),
        ("user", "a/", "empty segment"),
        ("user", "a/../b", "'..'"),
        ("user", "has space", "whitespace"),
        ("user", "q?x", "reserved"),
    ],
)
async def test_bad_scopes_and_paths_are_refused_with_a_fix(rt: Runtime, scope: str, path: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        await rt.memory.remember("text", scope=scope, path=path)
    assert await rt.memory.list() == []


async def test_bad_content_tags_and_source_are_refused(rt: Runtime) -> None:
    with pytest.raises(InvalidInputError, match="non-empty"):
        await rt.memory.remember("  ")
    with pytest.raises(InvalidInputError, match="list of strings"):
        await rt.memory.remember("x", tags="single")
    with pytest.raises(InvalidInputError, match="tag"):
        await rt.memory.remember("x", tags=[""])
    with pytest.raises(InvalidInputError, match="source"):
        await rt.memory.remember("x", source="")
    assert await rt.memory.list() == []


async def test_cjk_paths_are_fine(rt: Runtime) -> None:
    item = await rt.memory.remember("内容", scope="resources", path="文档/笔记")
    assert (await rt.memory.read("memory://resources/文档/笔记")).id == item.id


async def test_list_by_prefix_in_uri_order(rt: Runtime) -> None:
    await rt.memory.remember("b", scope="agent", path="team/b")
    await rt.memory.remember("a", scope="agent", path="team/a")
    await rt.memory.remember("c", scope="agent", path="teamwork")
    await rt.memory.remember("u", scope="user", path="team/a")
    assert [i.uri for i in await rt.memory.list("memory://agent/team/")] == [
        "memory://agent/team/a",
        "memory://agent/team/b",
    ]
    assert len(await rt.memory.list("memory://agent/")) == 3
    assert len(await rt.memory.list()) == 4
    assert len(await rt.memory.list(limit=2)) == 2
    with pytest.raises(InvalidInputError, match="must start with"):
        await rt.memory.list("user/")
    with pytest.raises(InvalidInputError, match="not one of"):
        await rt.memory.list("memory://global/")


async def test_forget_by_id_uri_or_prefix(rt: Runtime) -> None:
    a = await rt.memory.remember("alpha fact", path="facts/a")
    await rt.memory.remember("beta fact", path="facts/b")
    await rt.memory.remember("gamma fact", path="other/c")
    assert await rt.memory.forget(memory_id=a.id) == 1
    assert await rt.memory.forget(memory_id=a.id) == 0
    assert [h.uri for h in await rt.memory.recall("fact", k=10)] != []
    assert await rt.memory.forget(uri="memory://user/facts/b") == 1
    assert await rt.memory.forget(prefix="memory://user/other/") == 1
    assert await rt.memory.recall("fact", k=10) == []
    assert await rt.memory.list() == []
    with pytest.raises(NotFoundError):
        await rt.memory.get(a.id)
    with pytest.raises(NotFoundError, match="nothing is remembered"):
        await rt.memory.read("memory://user/facts/b")


async def test_forget_needs_exactly_one_selector(rt: Runtime) -> None:
    item = await rt.memory.remember("keep me", path="k")
    with pytest.raises(InvalidInputError, match="exactly one"):
        await rt.memory.forget()
    with pytest.raises(InvalidInputError, match="exactly one"):
        await rt.memory.forget(memory_id=item.id, uri=item.uri)
    with pytest.raises(InvalidInputError, match="not a memory id"):
        await rt.memory.forget(memory_id="ses_0123")
    with pytest.raises(InvalidInputError, match="at least a scope"):
        await rt.memory.forget(prefix="memory://")
    assert len(await rt.memory.list()) == 1


async def test_tenants_and_projects_never_see_each_others_items(home: Path) -> None:
    async with (
        Runtime.open(home, tenant="acme", project="web") as acme_web,
        Runtime.open(home, tenant="acme", project="api") as acme_api,
        Runtime.open(home, tenant="globex", project="web") as globex_web,
    ):
        mine = await acme_web.memory.remember("the launch codes are blue", path="secret")
        await acme_api.memory.remember("api launch checklist", path="secret")
        await globex_web.memory.remember("globex launch party", path="secret")
        hits = await acme_web.memory.recall("launch codes", k=10)
        assert [h.memory_id for h in hits] == [mine.id]
        assert [i.tenant + "/" + i.project for i in await globex_web.memory.list()] == ["globex/web"]
        assert await globex_web.memory.recall("codes blue") == []
        with pytest.raises(NotFoundError):
            await globex_web.memory.get(mine.id)
        assert await globex_web.memory.forget(memory_id=mine.id) == 0
        assert (await acme_web.memory.read("memory://user/secret")).content == "the launch codes are blue"
        assert await acme_api.memory.forget(prefix="memory://user/") == 1
        assert len(await acme_web.memory.list()) == 1


async def test_scores_depend_only_on_the_own_tenant(home: Path) -> None:
    """BM25 statistics are per tenant/project: another tenant's items do not move our scores."""
    async with Runtime.open(home, tenant="a") as a, Runtime.open(home, tenant="b") as b:
        for text in ["red apples", "green pears", "yellow bananas"]:
            await a.memory.remember(text)
        before = [h.score for h in await a.memory.recall("apples")]
        for i in range(50):
            await b.memory.remember(f"apples number {i}")
        assert [h.score for h in await a.memory.recall("apples")] == before


async def test_memory_survives_a_restart_and_is_shared_by_runtimes(home: Path) -> None:
    async with Runtime.open(home) as first, Runtime.open(home) as second:
        item = await first.memory.remember("shared across agents", source="run_abc")
        assert [h.memory_id for h in await second.memory.recall("shared")] == [item.id]
    async with Runtime.open(home) as reopened:
        again = await reopened.memory.read(item.uri)
        assert again == item and again.source == "run_abc"


async def test_list_pages_with_after(rt: Runtime) -> None:
    for i in range(5):
        await rt.memory.remember(f"item {i}", scope="resources", path=f"docs/{i}")
    first = await rt.memory.list("memory://resources/", limit=2)
    second = await rt.memory.list("memory://resources/", limit=2, after=first[-1].uri)
    third = await rt.memory.list("memory://resources/", limit=2, after=second[-1].uri)
    assert [i.content for i in first + second + third] == [f"item {i}" for i in range(5)]
