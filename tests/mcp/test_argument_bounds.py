"""Tool arguments are typed strictly and bounded (CONTRACT §4), checked through the real SDK client.

Every string and array in every tool's published inputSchema has a limit; a value past it, or of
the wrong JSON type, is an ``isError`` result naming the argument and what it should be, and an
error quotes at most 200 characters of what was sent. The walks read the schemas from
``tools/list``, so a tool added later is covered without naming it here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError

from rath_mcp.errors import QUOTE_CHARS
from rath_mcp.tools.arguments import JSONL_CHARS, PAGE_CHARS, TEXT_CHARS
from tests.mcp.conftest import call, call_error, text_of

pytestmark = pytest.mark.anyio

#: Values that pass for each required argument, so a call fails only on the argument under test.
PLAUSIBLE: dict[str, Any] = {
    "workflow": "echo",
    "action": "approve",
    "outcome": "applied",
    "session_ids": ["ses_0", "ses_1"],
    "wait_s": 0,
    "timeout_s": 0,
}
#: A wrong value of each JSON type, for arguments that do not take that type.
WRONG: dict[str, list[Any]] = {
    "string": ["7", "true", "{}", "[]"],
    "integer": [7],
    "number": [7.5],
    "boolean": [True],
    "object": [{}],
    "array": [[]],
    "null": [None],
}


def alternatives(prop: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The typed alternatives of a property schema (itself, or each arm of its ``anyOf``)."""
    if "anyOf" in prop:
        for arm in prop["anyOf"]:
            yield from alternatives(arm)
    else:
        yield prop


def accepted_types(prop: dict[str, Any]) -> set[str]:
    kinds = {arm.get("type") for arm in alternatives(prop)}
    if "number" in kinds:
        kinds.add("integer")  # JSON Schema: an integer is a number
    return {k for k in kinds if isinstance(k, str)}


def unbounded(schema: dict[str, Any], where: str) -> Iterator[str]:
    """Where ``schema`` (and every schema inside it) has a string or array without a limit."""
    for arm in alternatives(schema):
        kind = arm.get("type")
        if kind == "string" and "maxLength" not in arm and "enum" not in arm:
            yield where
        if kind == "array":
            if "maxItems" not in arm:
                yield where
            if isinstance(arm.get("items"), dict):
                yield from unbounded(arm["items"], where + "[]")
        if kind == "object" and "maxProperties" not in arm and "properties" not in arm:
            yield where


def arguments_with(tool: Any, name: str, value: Any) -> dict[str, Any]:
    required = tool.input_schema.get("required", [])
    base = {r: PLAUSIBLE.get(r, "x") for r in required}
    waits = ("wait_s", "timeout_s")  # a run started by the walk is not waited for
    extra = {k: v for k, v in PLAUSIBLE.items() if k in waits and k in tool.input_schema["properties"]}
    return base | extra | {name: value}


def longest_run(text: str, char: str) -> int:
    return max((len(m) for m in re.findall(f"{re.escape(char)}+", text)), default=0)


async def test_every_string_and_array_in_every_input_schema_has_a_limit(client: Client) -> None:
    tools = (await client.list_tools()).tools
    missing = [f"{t.name}.{w}" for t in tools for n, p in t.input_schema["properties"].items() for w in unbounded(p, n)]
    assert missing == [], f"no limit in the schema: {missing}"
    for tool in tools:
        for name, prop in tool.input_schema["properties"].items():
            if name.endswith("_id") or name == "cursor":
                assert all(arm.get("maxLength", 0) <= 64 for arm in alternatives(prop)), (tool.name, name)


async def test_a_value_past_any_limit_is_refused_naming_the_argument_and_the_limit(server: MCPServer) -> None:
    """Each string and array argument of each tool, one character or item past its limit."""
    async with Client(server, mode="legacy") as client:
        checked = 0
        for tool in (await client.list_tools()).tools:
            for name, prop in tool.input_schema["properties"].items():
                for arm in alternatives(prop):
                    if arm.get("type") == "string" and "maxLength" in arm:
                        limit, value = arm["maxLength"], "q" * (arm["maxLength"] + 1)
                    elif arm.get("type") == "array" and "maxItems" in arm:
                        limit, value = arm["maxItems"], ["q"] * (arm["maxItems"] + 1)
                    else:
                        continue
                    text = await call_error(client, tool.name, **arguments_with(tool, name, value))
                    assert text.startswith(f"invalid arguments for {tool.name}: {name}"), (tool.name, name, text)
                    assert str(limit) in text, (tool.name, name, text)
                    assert longest_run(text, "q") <= QUOTE_CHARS, (tool.name, name, len(text))
                    checked += 1
        assert checked >= 30


@pytest.mark.parametrize(
    ("tool", "arguments", "argument"),
    [
        ("session_get", {"session_id": "x" * 10_000_000}, "session_id"),
        ("memory_recall", {"query": "x" * 10_000_000}, "query"),
        ("delegate", {"task": "x" * 10_000_000, "wait_s": 1}, "task"),
    ],
)
async def test_a_ten_megabyte_argument_gets_a_short_error_stating_the_limit(
    client: Client, tool: str, arguments: dict[str, Any], argument: str
) -> None:
    text = await call_error(client, tool, **arguments)
    assert len(text) < 400, len(text)
    assert f"{argument}: String should have at most" in text and "characters" in text, text
    assert (await call(client, "session_list"))["sessions"] == []


async def test_every_wrong_type_is_refused_naming_the_argument_and_the_type(server: MCPServer) -> None:
    """No coercion: ``"7"`` is not an integer, ``"true"`` or ``1`` not a boolean, ``"{}"`` not an object."""
    async with Client(server, mode="legacy") as client:
        refused: list[str] = []
        for tool in (await client.list_tools()).tools:
            for name, prop in tool.input_schema["properties"].items():
                takes = accepted_types(prop)
                if not takes & {"integer", "number", "boolean", "object", "array"}:
                    continue
                for kind, values in WRONG.items():
                    if kind in takes or (kind == "integer" and "number" in takes):
                        continue
                    for value in values:
                        text = await call_error(client, tool.name, **arguments_with(tool, name, value))
                        assert text.startswith(f"invalid arguments for {tool.name}: {name}: "), (tool.name, name, text)
                        assert re.search(r"should be (an? \w+|greater|less)|not one of|should have", text), text
                        refused.append(f"{tool.name}.{name}={value!r}")
        assert len(refused) >= 100, refused
        for sent, expected in [
            ({"limit": "7"}, "limit: Input should be an integer, not a string"),
            ({"limit": 7.5}, "limit: Input should be an integer, not a number"),
            ({"offset": True}, "offset: Input should be an integer, not a boolean"),
        ]:
            text = await call_error(client, "session_get", session_id="ses_x", **sent)
            assert expected in text, text
        text = await call_error(client, "session_fork", session_id="ses_x", isolate_workspace="true")
        assert "isolate_workspace: Input should be a boolean, not a string" in text
        text = await call_error(client, "session_fork", session_id="ses_x", isolate_workspace=1)
        assert "isolate_workspace: Input should be a boolean, not an integer" in text
        text = await call_error(client, "session_create", metadata="{}")
        assert "metadata: Input should be an object, not a string" in text
        assert (await call(client, "session_list"))["sessions"] == []


async def test_text_that_spells_json_stays_text(client: Client) -> None:
    """A string argument is never read as the JSON it spells (the SDK's pre-parse did, and refused "[1, 2]")."""
    created = await call(client, "session_create", message="[1, 2]", metadata={"note": "{}"})
    assert created["metadata"] == {"note": "{}"}
    page = await call(client, "session_get", session_id=created["session_id"])
    assert page["chunks"][0]["content"] == "[1, 2]"


@pytest.mark.parametrize(
    ("tool", "cursor"),
    [
        ("session_list", "garbage"),
        ("session_list", ""),
        ("session_list", "run_0190f3c2a1b4e5f60718293a"),
        ("run_list", "ses_0190f3c2a1b4e5f60718293a"),
        ("run_list", "run_0190F3C2A1B4E5F60718293A' OR 1=1"),
    ],
)
async def test_a_garbage_cursor_is_refused_naming_it(client: Client, tool: str, cursor: str) -> None:
    text = await call_error(client, tool, cursor=cursor)
    assert text.startswith(f"invalid arguments for {tool}: cursor: String should match pattern"), text


async def test_a_cursor_a_page_gave_still_pages(client: Client) -> None:
    ids = [(await call(client, "session_create", message=str(i)))["session_id"] for i in range(3)]
    first = await call(client, "session_list", limit=2)
    rest = await call(client, "session_list", cursor=first["next_cursor"])
    assert [s["session_id"] for s in first["sessions"] + rest["sessions"]] == ids[::-1]


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("run_wait", {"run_id": "run_x", "timeout_s": 51}, "timeout_s: Input should be less than or equal to 50"),
        ("run_wait", {"run_id": "run_x", "timeout_s": 1e300}, "timeout_s: Input should be less than or equal to 50"),
        ("run_start", {"workflow": "echo", "wait_s": 3600}, "wait_s: Input should be less than or equal to 50"),
        ("delegate", {"task": "t", "wait_s": 50.5}, "wait_s: Input should be less than or equal to 50"),
        ("run_fork", {"run_id": "run_x", "wait_s": 1e9}, "wait_s: Input should be less than or equal to 50"),
        ("run_start", {"workflow": "echo", "deadline_s": 1e300}, "deadline_s: Input should be less than or equal to"),
        ("run_start", {"workflow": "echo", "deadline_s": 0}, "deadline_s: Input should be greater than 0"),
    ],
)
async def test_waits_and_deadlines_past_their_range_are_refused(
    client: Client, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    text = await call_error(client, tool, **arguments)
    assert expected in text, text
    assert (await call(client, "run_list"))["runs"] == []


async def test_a_runtime_error_quotes_at_most_200_characters_of_a_long_value(client: Client) -> None:
    """The echo workflow's input schema check names the bad value; a 5,000-character one is cut."""
    text = await call_error(client, "run_start", workflow="echo", input={"message": ["y" * 5000]})
    assert "does not match its schema" in text and "(5000 characters)" in text, text
    assert 0 < longest_run(text, "y") <= QUOTE_CHARS
    path = "p" * 300 + "//x"  # within the path's limit, refused by the runtime, which quotes it
    text = await call_error(client, "memory_remember", content="c", path=path)
    assert "empty segment" in text and 0 < longest_run(text, "p") <= QUOTE_CHARS, text


async def test_json_arguments_are_bounded_inside(client: Client) -> None:
    text = await call_error(client, "session_create", metadata={"a": {"b": "z" * 200_001}})
    assert "metadata: at .a.b, a string of 200001 characters; the limit is 200000" in text, text
    text = await call_error(client, "session_create", metadata={"a": list(range(1001))})
    assert "metadata: at .a, an array of 1001 items; the limit is 1000" in text, text
    text = await call_error(client, "session_create", metadata={"a": [[0] * 1000 for _ in range(11)]})
    assert "metadata: holds more than 10000 values in all" in text, text
    assert longest_run(text, "z") == 0
    assert (await call(client, "session_list"))["sessions"] == []


async def test_an_import_quotes_at_most_200_characters_of_a_bad_id_inside_it(client: Client) -> None:
    sid = (await call(client, "session_create", message="hello"))["session_id"]
    lines = (await call(client, "session_export", session_id=sid))["jsonl"].splitlines()
    header = json.loads(lines[0]) | {"id": "ses_" + "s" * 5000}
    text = await call_error(client, "session_import", jsonl="\n".join([json.dumps(header), *lines[1:]]))
    assert "is not a session id" in text and "(5004 characters)" in text, text
    assert 0 < longest_run(text, "s") <= QUOTE_CHARS


async def test_an_export_is_at_most_what_an_import_takes(client: Client) -> None:
    """What session_export makes, session_import takes: an export past the import's limit is refused."""
    sid = (await call(client, "session_create", message="m" * TEXT_CHARS))["session_id"]
    while True:
        longer = (await call(client, "session_append", session_id=sid, content="m" * TEXT_CHARS))["session_id"]
        result = await client.call_tool("session_export", {"session_id": longer})
        if result.is_error:
            break
        sid = longer
    assert f"session {longer} exports to more than {JSONL_CHARS} characters" in text_of(result)
    exported = await call(client, "session_export", session_id=sid)
    assert exported["jsonl"] is None  # past 256 KB an export is an artifact: the link's resource holds it whole
    (whole,) = (await client.read_resource(exported["uri"])).contents
    jsonl = whole.text  # type: ignore[union-attr]
    assert JSONL_CHARS - TEXT_CHARS < len(jsonl) <= JSONL_CHARS
    assert (await call(client, "session_import", jsonl=jsonl))["session_id"] == sid


async def test_a_page_of_long_messages_holds_about_a_million_characters(client: Client) -> None:
    """An answer's size is bounded too: a page stops before PAGE_CHARS of content and says where to go on."""
    sid = (await call(client, "session_create", message="a" * TEXT_CHARS))["session_id"]
    for _ in range(7):
        sid = (await call(client, "session_append", session_id=sid, content="a" * TEXT_CHARS))["session_id"]
    first = await call(client, "session_get", session_id=sid, limit=500)
    chunks = await page_chunks(client, first)
    assert len(chunks) == PAGE_CHARS // TEXT_CHARS and first["next_offset"] == PAGE_CHARS // TEXT_CHARS
    rest = await call(client, "session_get", session_id=sid, offset=first["next_offset"], limit=500)
    assert len(await page_chunks(client, rest)) == 8 - len(chunks) and rest["next_offset"] is None


async def page_chunks(client: Client, page: dict[str, Any]) -> list[Any]:
    """A page's chunks: inline, or (a page past 256 KB) the JSON array its artifact link holds."""
    if "uri" not in page:
        return list(page["chunks"])
    assert page["chunks"] == []
    (whole,) = (await client.read_resource(page["uri"])).contents
    return list(json.loads(whole.text))  # type: ignore[union-attr]


async def test_a_prompt_quotes_at_most_200_characters_of_a_long_argument(client: Client) -> None:
    with pytest.raises(MCPError) as caught:
        await client.get_prompt("review_run", {"run_id": "r" * 100_000})
    message = caught.value.error.message
    assert "(100000 characters)" in message and 0 < longest_run(message, "r") <= QUOTE_CHARS, message[:300]
