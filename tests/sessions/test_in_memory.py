"""The shipped in-memory ``SessionStore``: the same contract as SQLite, no file (see also test_properties)."""

from __future__ import annotations

import pytest

from runtime import ConflictError, NotFoundError, Runtime, Usage
from runtime.sessions import InMemoryHome, InMemorySessionStore, SessionService, SessionStore

pytestmark = pytest.mark.anyio


def service(home: InMemoryHome, tenant: str = "local") -> SessionService:
    store: SessionStore = InMemorySessionStore(home, tenant, "default")  # mypy checks the protocol here
    return SessionService(store)


async def test_tenants_of_one_in_memory_home_are_isolated() -> None:
    home = InMemoryHome()
    acme, globex = service(home, "acme"), service(home, "globex")
    s = await acme.create([{"kind": "user", "content": "acme only"}])
    with pytest.raises(NotFoundError, match="in globex/default"):
        await globex.get(s.id)
    assert (await globex.page())[0] == []
    assert [x.id for x in (await acme.page())[0]] == [s.id]


async def test_an_export_moves_between_the_sqlite_and_the_in_memory_store(rt: Runtime) -> None:
    root = await rt.sessions.create([{"kind": "user", "content": "p"}], usage=Usage(total_tokens=4))
    child = await rt.sessions.append(root.id, [{"kind": "assistant", "content": "c"}], usage=Usage(total_tokens=1))
    text = await rt.sessions.export_jsonl(child.id)
    home = InMemoryHome()
    memory = service(home)
    assert (await memory.import_jsonl(text)).id == child.id
    assert await memory.get(child.id) == await rt.sessions.get(child.id)
    assert await memory.export_jsonl(child.id) == text
    with pytest.raises(ConflictError, match="already used in this home"):
        await service(home, "other").import_jsonl(text)
    assert [s.id for s in (await service(home, "other").page())[0]] == []
