"""Session tools and resources through a real MCP client, in both protocol eras."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import TextResourceContents

from rath_mcp.server import build_server
from runtime import Runtime
from tests.mcp.conftest import call, call_error

pytestmark = pytest.mark.anyio

SESSION_TOOLS = {
    "session_create",
    "session_append",
    "session_get",
    "session_list",
    "session_fork",
    "session_merge",
    "session_detach",
    "session_lineage",
    "session_export",
    "session_import",
}


async def test_every_session_tool_is_listed_with_input_and_output_schemas(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) >= SESSION_TOOLS
    for name in SESSION_TOOLS:
        assert tools[name].description, name
        assert tools[name].output_schema is not None, name
    assert tools["session_create"].input_schema["properties"].keys() >= {"message", "role", "system", "workspace"}


async def test_session_create_puts_the_system_prompt_before_the_message(client: Client) -> None:
    created = await call(client, "session_create", message="hello", system="be brief", metadata={"team": "a"})
    assert created["session_id"].startswith("ses_")
    assert created["length"] == 2 and created["op"] == "create" and created["metadata"] == {"team": "a"}
    page = await call(client, "session_get", session_id=created["session_id"])
    assert [(c["kind"], c["content"]) for c in page["chunks"]] == [("system", "be brief"), ("user", "hello")]


async def test_session_append_returns_a_new_snapshot_and_leaves_the_old_one_alone(client: Client) -> None:
    first = await call(client, "session_create", message="one")
    second = await call(client, "session_append", session_id=first["session_id"], content="two", role="assistant")
    assert second["session_id"] != first["session_id"]
    assert second["parents"] == [first["session_id"]] and second["length"] == 2
    old = await call(client, "session_get", session_id=first["session_id"])
    assert old["length"] == 1


async def test_session_get_pages_through_chunks_with_next_offset(client: Client) -> None:
    sid = (await call(client, "session_create", message="m0"))["session_id"]
    for i in range(1, 5):
        sid = (await call(client, "session_append", session_id=sid, content=f"m{i}"))["session_id"]
    page = await call(client, "session_get", session_id=sid, offset=0, limit=2)
    assert [c["content"] for c in page["chunks"]] == ["m0", "m1"] and page["next_offset"] == 2
    last = await call(client, "session_get", session_id=sid, offset=4, limit=2)
    assert [c["content"] for c in last["chunks"]] == ["m4"] and last["next_offset"] is None


async def test_session_list_pages_newest_first(client: Client) -> None:
    ids = [(await call(client, "session_create", message=str(i)))["session_id"] for i in range(3)]
    first = await call(client, "session_list", limit=2)
    assert [s["session_id"] for s in first["sessions"]] == ids[::-1][:2]
    rest = await call(client, "session_list", cursor=first["next_cursor"], limit=2)
    assert [s["session_id"] for s in rest["sessions"]] == ids[:1] and rest["next_cursor"] is None


async def test_session_fork_returns_ids_that_share_history(client: Client) -> None:
    base = await call(client, "session_create", message="shared")
    forks = await call(client, "session_fork", session_id=base["session_id"], count=3)
    assert len(set(forks["session_ids"])) == 3
    for sid in forks["session_ids"]:
        page = await call(client, "session_get", session_id=sid)
        assert page["parents"] == [base["session_id"]] and page["op"] == "fork"
        assert [c["content"] for c in page["chunks"]] == ["shared"]


async def test_session_merge_keeps_the_shared_prefix_once_then_each_branch(client: Client) -> None:
    base = (await call(client, "session_create", message="root"))["session_id"]
    a, b = (await call(client, "session_fork", session_id=base, count=2))["session_ids"]
    a = (await call(client, "session_append", session_id=a, content="from a"))["session_id"]
    b = (await call(client, "session_append", session_id=b, content="from b"))["session_id"]
    merged = await call(client, "session_merge", session_ids=[a, b])
    page = await call(client, "session_get", session_id=merged["session_id"])
    assert [c["content"] for c in page["chunks"]] == ["root", "from a", "from b"]
    assert merged["parents"] == [a, b]
    concat = await call(client, "session_merge", session_ids=[a, b], strategy="concat")
    assert concat["length"] == 4


async def test_session_merge_of_a_single_session_says_two_are_needed(client: Client) -> None:
    sid = (await call(client, "session_create", message="x"))["session_id"]
    text = await call_error(client, "session_merge", session_ids=[sid])
    assert "at least 2" in text


async def test_session_merge_of_the_same_id_twice_is_refused_and_writes_nothing(client: Client) -> None:
    sid = (await call(client, "session_create", message="x"))["session_id"]
    text = await call_error(client, "session_merge", session_ids=[sid, sid])
    assert "same session id twice" in text and "pass each branch once" in text
    assert len((await call(client, "session_list"))["sessions"]) == 1


async def test_session_detach_makes_a_root_with_the_same_chunks(client: Client) -> None:
    sid = (await call(client, "session_create", message="keep me", workspace="ws1"))["session_id"]
    detached = await call(client, "session_detach", session_id=sid)
    assert detached["parents"] == [] and detached["op"] == "detach"
    assert detached["placement"]["workspace"] == "ws1"
    page = await call(client, "session_get", session_id=detached["session_id"])
    assert [c["content"] for c in page["chunks"]] == ["keep me"]


async def test_session_lineage_returns_nodes_edges_and_mermaid(client: Client) -> None:
    base = (await call(client, "session_create", message="r"))["session_id"]
    a, b = (await call(client, "session_fork", session_id=base, count=2))["session_ids"]
    merged = (await call(client, "session_merge", session_ids=[a, b]))["session_id"]
    graph = await call(client, "session_lineage", session_id=merged)
    assert {n["id"] for n in graph["nodes"]} == {base, a, b, merged}
    assert {(e["parent"], e["child"]) for e in graph["edges"]} == {(base, a), (base, b), (a, merged), (b, merged)}
    assert graph["mermaid"].startswith("graph TD") and f"{a} --> {merged}" in graph["mermaid"]


async def test_unknown_session_ids_give_an_error_that_says_how_to_find_one(client: Client) -> None:
    text = await call_error(client, "session_get", session_id="ses_missing")
    assert "ses_missing" in text and "session_list" in text


async def test_bad_workspace_names_are_refused(client: Client) -> None:
    text = await call_error(client, "session_create", message="x", workspace="../escape")
    assert "workspace" in text
    assert (await call(client, "session_list"))["sessions"] == []


async def test_session_export_then_import_into_another_home_restores_it(client: Client, tmp_path: Path) -> None:
    base = (await call(client, "session_create", message="carry me"))["session_id"]
    sid = (await call(client, "session_append", session_id=base, content="and me"))["session_id"]
    result = await client.call_tool("session_export", {"session_id": sid})
    jsonl = result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content == {"session_id": sid, "jsonl": jsonl}
    async with Runtime.open(tmp_path / "other") as other, Client(build_server(other), mode=client.mode) as c2:
        imported = await call(c2, "session_import", jsonl=jsonl)
        assert imported["session_id"] == sid and imported["parents"] == [base]
        page = await call(c2, "session_get", session_id=sid)
        assert [c["content"] for c in page["chunks"]] == ["carry me", "and me"]
        again = await call(c2, "session_import", jsonl=jsonl)
        assert again["session_id"] == sid


async def test_importing_malformed_jsonl_is_an_error_and_writes_nothing(client: Client) -> None:
    text = await call_error(client, "session_import", jsonl='{"not": "a session"}\n')
    assert text
    assert (await call(client, "session_list"))["sessions"] == []


async def _read_text(client: Client, uri: str) -> TextResourceContents:
    contents = (await client.read_resource(uri)).contents
    assert len(contents) == 1 and isinstance(contents[0], TextResourceContents)
    return contents[0]


async def test_session_resources_give_json_markdown_and_mermaid(client: Client) -> None:
    sid = (await call(client, "session_create", message="hi there", system="sys"))["session_id"]
    as_json = await _read_text(client, f"rath://sessions/{sid}")
    assert as_json.mime_type == "application/json"
    body = json.loads(as_json.text)
    assert body["id"] == sid and [c["content"] for c in body["chunks"]] == ["sys", "hi there"]
    md = await _read_text(client, f"rath://sessions/{sid}/transcript")
    assert md.mime_type == "text/markdown" and "## 2. user" in md.text and "hi there" in md.text
    mermaid = await _read_text(client, f"rath://sessions/{sid}/lineage")
    assert mermaid.text.startswith("graph TD") and sid in mermaid.text


async def test_reading_an_unknown_session_resource_is_a_not_found_error(client: Client) -> None:
    with pytest.raises(MCPError) as caught:
        await client.read_resource("rath://sessions/ses_nope")
    assert "ses_nope" in str(caught.value)


async def test_the_server_names_itself_with_a_version(server: object) -> None:
    async with Client(server, mode="legacy") as c:  # type: ignore[arg-type]
        assert c.server_info is not None
        assert c.server_info.name == "rath-mcp" and c.server_info.version


async def test_session_fork_with_isolate_workspace_gives_each_fork_a_copy_of_the_files(
    client: Client, rt: Runtime
) -> None:
    base = await call(client, "session_create", message="w", workspace="proj")
    assert base["placement"] == {"backend": "local", "workspace": "proj"}
    parent = await rt.sandboxes.get(rt.sandboxes.placement("proj"))
    await parent.write_file("notes.txt", "shared before the fork")
    forks = await call(client, "session_fork", session_id=base["session_id"], count=2, isolate_workspace=True)
    workspaces = set()
    for sid in forks["session_ids"]:
        placement = (await rt.sessions.info(sid)).placement
        workspaces.add(placement.workspace)
        sandbox = await rt.sandboxes.get(placement)
        assert await sandbox.read_file("notes.txt") == b"shared before the fork"
    assert len(workspaces) == 2 and "proj" not in workspaces
    plain = await call(client, "session_fork", session_id=base["session_id"])
    assert (await rt.sessions.info(plain["session_ids"][0])).placement.workspace == "proj"


async def test_arguments_that_break_the_input_schema_get_a_short_what_and_how_to_fix(client: Client) -> None:
    text = await call_error(client, "session_fork", count=100)
    assert text.startswith("invalid arguments for session_fork: ")
    assert "session_id: Field required" in text and "count: Input should be less than or equal to 64" in text
    assert "call session_fork again" in text
    assert "pydantic.dev" not in text and "input_value" not in text


async def test_session_get_gives_each_chunk_only_the_fields_it_has(client: Client, rt: Runtime) -> None:
    call_ = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    s = await rt.sessions.create(
        [
            {"kind": "user", "content": "read a"},
            {"kind": "assistant", "content": "", "tool_calls": [call_]},
            {"kind": "tool_result", "content": "A", "tool_call_id": "call_1", "name": "read_file"},
        ]
    )
    page = await call(client, "session_get", session_id=s.id)
    assert page["chunks"] == [  # every chunk has its trust (CONTRACT §16)
        {"kind": "user", "content": "read a", "trust": "user"},
        {"kind": "assistant", "content": "", "tool_calls": [call_], "trust": "model"},
        {"kind": "tool_result", "content": "A", "tool_call_id": "call_1", "name": "read_file", "trust": "tool"},
    ]
