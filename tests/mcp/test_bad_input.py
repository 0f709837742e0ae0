"""Bad input through a real MCP client gets a clear answer, and nothing is half-written.

Unknown argument names, run starts that fail validation, tampered session imports, integers past
what the store holds, and values JSON cannot carry: each is refused with text that says what was
wrong (never the SDK's bare "Error executing tool X"), and the store is left as it was.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from runtime import InvalidInputError, Runtime
from tests.mcp.conftest import call, call_error

pytestmark = pytest.mark.anyio


async def nothing_written(client: Client) -> None:
    assert (await call(client, "session_list"))["sessions"] == []
    assert (await call(client, "run_list"))["runs"] == []


async def test_every_tool_refuses_an_unknown_argument_naming_it_and_the_ones_it_takes(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert len(tools) == 37
    for tool in tools:
        schema = tool.input_schema
        assert schema.get("additionalProperties") is False, tool.name
        text = await call_error(client, tool.name, bogus_argument=1)
        assert "has no argument 'bogus_argument'" in text, (tool.name, text)
        accepted = list(schema.get("properties", {}))
        assert f"it takes: {', '.join(accepted) if accepted else 'none'}" in text, (tool.name, text)
    await nothing_written(client)


async def test_a_misspelt_argument_writes_nothing(client: Client) -> None:
    text = await call_error(client, "session_create", mesage="hello")
    assert "session_create has no argument 'mesage'" in text and "message" in text
    text = await call_error(client, "delegate", task="draft it", worklow="approval")
    assert "delegate has no argument 'worklow'" in text and "it takes: task, workflow, wait_s" in text
    await nothing_written(client)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"workflow": "no_such_flow"}, "no_such_flow"),
        ({"workflow": "echo", "input": {"message": 42}}, "does not match its schema"),
        ({"workflow": "echo", "session_id": "ses_000000000000000000000000"}, "ses_000000000000000000000000"),
    ],
)
async def test_a_run_start_that_fails_validation_makes_no_session(
    client: Client, arguments: dict[str, Any], expected: str
) -> None:
    text = await call_error(client, "run_start", message="hello", **arguments)
    assert expected in text
    await nothing_written(client)


async def test_a_delegate_to_an_unknown_workflow_makes_no_session(client: Client) -> None:
    text = await call_error(client, "delegate", task="draft it", workflow="no_such_flow")
    assert "no_such_flow" in text
    await nothing_written(client)


async def test_run_start_with_a_used_key_and_a_message_returns_that_run_without_a_new_session(client: Client) -> None:
    first = await call(client, "run_start", workflow="echo", message="once", idempotency_key="k1", wait_s=10)
    again = await call(client, "run_start", workflow="echo", message="once", idempotency_key="k1")
    assert again["run_id"] == first["run_id"]
    text = await call_error(client, "run_start", workflow="approval", message="once", idempotency_key="k1")
    assert "idempotency key 'k1' was used for run" in text and first["run_id"] in text
    sessions = (await call(client, "session_list"))["sessions"]
    assert {s["session_id"] for s in sessions} == {first["session_id"], first["output_session_id"]}


async def exported(client: Client) -> tuple[str, list[dict[str, Any]]]:
    """A real export of a fresh session (then forgotten by being tampered with): its id and its lines."""
    sid = (await call(client, "session_create", message="hello", workspace="w1"))["session_id"]
    text = (await call(client, "session_export", session_id=sid))["jsonl"]
    return sid, [json.loads(line) for line in text.splitlines()]


def deep_text(levels: int) -> str:
    """JSON text of objects nested ``levels`` deep (written out, as Python's encoder recurses)."""
    return '{"a":' * levels + "{}" + "}" * levels


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


HEADER_TAMPERING: list[tuple[str, dict[str, Any], str]] = [
    ("workspace escapes", {"placement": {"backend": "local", "workspace": "../../../etc"}}, "workspace name"),
    ("unknown backend", {"placement": {"backend": "evil", "workspace": "w1"}}, "unknown sandbox backend 'evil'"),
    ("own parent", {"parents": ["SELF"]}, "names itself as its parent"),
    ("missing parent", {"parents": ["ses_0123456789abcdef01234567"]}, "ses_0123456789abcdef01234567"),
    ("created_at not a time", {"created_at": -5.0}, "created_at"),
    ("usage past 64 bits", {"usage": {"prompt_tokens": 2**70, "completion_tokens": 0, "total_tokens": 0}}, "64 bits"),
]


@pytest.mark.parametrize(("case", "change", "expected"), HEADER_TAMPERING, ids=[c[0] for c in HEADER_TAMPERING])
async def test_session_import_refuses_a_tampered_header(
    client: Client, case: str, change: dict[str, Any], expected: str
) -> None:
    sid, lines = await exported(client)
    other = "ses_" + ("f" if sid[4] != "f" else "e") + sid[5:]  # an id not in this store
    header = {**lines[0], "id": other, **change}
    header["parents"] = [other if p == "SELF" else p for p in header.get("parents", [])]
    text = "\n".join(json.dumps(line) for line in [header, *lines[1:]])
    error = await call_error(client, "session_import", jsonl=text)
    assert expected in error, error
    assert [s["session_id"] for s in (await call(client, "session_list"))["sessions"]] == [sid]


@pytest.mark.parametrize(
    ("header_text", "expected"),
    [
        ('"created_at": NaN', "nan"),
        ('"created_at": Infinity', "inf"),
        ('"metadata": ' + deep_text(5000), "nested deeper than 64"),
        ('"metadata": ' + deep_text(100), "nested deeper than 64"),
    ],
    ids=["nan", "infinity", "metadata 5000 deep", "metadata 100 deep"],
)
async def test_session_import_refuses_values_json_cannot_carry(client: Client, header_text: str, expected: str) -> None:
    sid, lines = await exported(client)
    key = header_text.split(":")[0].strip('"')
    header = {k: v for k, v in lines[0].items() if k != key}
    body = json.dumps({**header, "id": "ses_" + "e" * 24})
    text = body[:-1] + ", " + header_text + "}\n" + "\n".join(json.dumps(line) for line in lines[1:])
    error = await call_error(client, "session_import", jsonl=text)
    assert "line 1 of the JSONL" in error and expected in error, error
    assert [s["session_id"] for s in (await call(client, "session_list"))["sessions"]] == [sid]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("run_events", {"run_id": "run_000000000000000000000000", "after_seq": 2**63}),
        ("session_get", {"session_id": "ses_000000000000000000000000", "offset": 2**63}),
        ("session_get", {"session_id": "ses_000000000000000000000000", "offset": -1}),
    ],
)
async def test_integers_past_the_store_s_range_are_refused_by_the_schema(
    client: Client, tool: str, arguments: dict[str, Any]
) -> None:
    text = await call_error(client, tool, **arguments)
    assert text.startswith(f"invalid arguments for {tool}:"), text
    assert "offset" in text or "after_seq" in text, text
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name, prop in tools[tool].input_schema["properties"].items():
        if prop.get("type") == "integer":
            assert prop.get("maximum", 0) <= 2**63 - 1, (tool, name)


async def test_a_lone_surrogate_in_any_request_is_invalid_params_naming_where(client: Client, era: str) -> None:
    with pytest.raises(MCPError) as caught:
        await client.call_tool("session_create", {"message": "half a pair: \ud800"})
    assert caught.value.error.code == INVALID_PARAMS
    assert "params.arguments.message holds a lone UTF-16 surrogate" in caught.value.error.message
    if era == "legacy":  # the 2026-07-28 client puts the URI in a header, which it cannot encode, and stops there
        with pytest.raises(MCPError) as caught:
            await client.read_resource("rath://sessions/ses_\udc00")
        assert caught.value.error.code == INVALID_PARAMS and "params.uri" in caught.value.error.message
    await nothing_written(client)


async def test_arguments_nested_past_the_limit_are_invalid_params(client: Client) -> None:
    with pytest.raises(MCPError) as caught:
        await client.call_tool("session_create", {"metadata": deep(250)})
    assert caught.value.error.code == INVALID_PARAMS
    assert "nested deeper than 100 levels" in caught.value.error.message
    text = await call_error(client, "session_create", metadata=deep(80))  # under the wire's limit, over the store's
    assert "metadata" in text and "nested deeper than 64 levels" in text
    await nothing_written(client)


async def test_the_runtime_refuses_nan_and_infinity_wherever_json_is_stored(rt: Runtime) -> None:
    """The one check behind the tools, met by a Python caller of the runtime (an MCP client cannot send NaN)."""
    for value in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(InvalidInputError, match="no NaN or Infinity"):
            await rt.runs.start("echo", input={"message": "x", "n": value})
        with pytest.raises(InvalidInputError, match="no NaN or Infinity"):
            await rt.sessions.create(metadata={"n": [value]})
    approval = await rt.runs.start("approval", input={"draft": "x"})
    with pytest.raises(InvalidInputError, match=r"value\.n is nan"):
        await rt.runs.resolve_interrupt("int_000000000000000000000000", "respond", {"n": float("nan")})
    assert [r.id for r in (await rt.runs.list())[0]] == [approval.id]
    assert (await rt.sessions.page())[0] == []


#: Values a fuzzer tries on every argument: wrong types, integers past 64 bits, empty and very long
#: strings, ids that do not exist, path tricks.
FUZZ: list[Any] = [None, "", "x" * 100_000, 2**63, -1, 1.5, True, [], {"a": 1}, "ses_000000000000000000000000", "../.."]
PLAUSIBLE = {"workflow": "echo", "action": "approve", "outcome": "applied", "session_ids": ["ses_0", "ses_1"]}


async def test_a_quick_fuzz_of_every_argument_never_gets_a_bare_error(server: Any) -> None:
    """Each bad value on each argument of each tool: a result, or an error saying what was wrong."""
    async with Client(server) as client:
        for tool in (await client.list_tools()).tools:
            required = tool.input_schema.get("required", [])
            for name in tool.input_schema.get("properties", {}):
                for value in FUZZ:
                    arguments = {r: PLAUSIBLE.get(r, "x") for r in required if r != name} | {name: value}
                    if tool.name in ("run_start", "delegate") and name != "wait_s":
                        arguments["wait_s"] = 0  # a fuzzed run is not waited for
                    if tool.name == "run_wait" and name != "timeout_s":
                        arguments["timeout_s"] = 0
                    result = await client.call_tool(tool.name, arguments)
                    text = "\n".join(getattr(block, "text", "") for block in result.content)
                    assert text.strip() != f"Error executing tool {tool.name}", (tool.name, name, repr(value)[:40])
                    assert "Traceback" not in text, (tool.name, name, text)


@pytest.mark.parametrize(
    "uri",
    [
        "rath://sessions/x",
        "rath://sessions/ses_000000000000000000000000/transcript",
        "rath://sessions/ses_000000000000000000000000/lineage",
        "rath://runs/run_000000000000000000000000",
        "rath://runs/run_000000000000000000000000/events",
        "rath://workflows/nope",
        "rath://memory/mem_x",
        "rath://memory/mem_000000000000000000000000",
    ],
)
async def test_every_resource_with_a_garbage_id_is_invalid_params_saying_so(client: Client, uri: str) -> None:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    assert caught.value.error.code == INVALID_PARAMS
    assert uri.rsplit("/", 1)[-1] in caught.value.error.message or uri.split("/")[3] in caught.value.error.message
