"""The scripted provider answers deterministically from a JSON script, and says clearly when it runs out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.errors import InvalidInputError
from runtime.providers import ModelRequest, ProviderError, ScriptedProvider
from runtime.sessions.model import Chunk


def said(text: str) -> ModelRequest:
    return ModelRequest(messages=[Chunk(kind="user", content=text)])


@pytest.mark.anyio
async def test_replies_come_in_order_with_numbered_tool_calls() -> None:
    provider = ScriptedProvider(
        [
            {"content": "writing", "tool_calls": [{"name": "write_file", "arguments": {"path": "a"}}]},
            {"content": "done", "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
        ]
    )
    first = await provider.complete(said("go"))
    second = await provider.complete(said("go"))
    assert first.content == "writing" and first.stop_reason == "tool_calls"
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in first.tool_calls] == [
        ("call_1", "write_file", {"path": "a"})
    ]
    assert second.content == "done" and second.tool_calls == [] and second.stop_reason == "stop"
    assert (second.usage.prompt_tokens, second.usage.completion_tokens, second.usage.total_tokens) == (5, 2, 7)
    assert first.usage.total_tokens > 0  # estimated when the script gives none


@pytest.mark.anyio
async def test_when_matches_the_last_user_message_and_repeat_keeps_a_reply() -> None:
    provider = ScriptedProvider(
        {
            "replies": [
                {"when": "WEATHER", "content": "Sunny.", "repeat": True},
                {"content": "first generic"},
                {"content": "second generic"},
            ]
        }
    )
    assert (await provider.complete(said("hello"))).content == "first generic"
    assert (await provider.complete(said("the weather?"))).content == "Sunny."
    assert (await provider.complete(said("weather again"))).content == "Sunny."
    assert (await provider.complete(said("bye"))).content == "second generic"


@pytest.mark.anyio
async def test_running_out_of_replies_is_a_clear_error() -> None:
    provider = ScriptedProvider([{"content": "only one"}])
    await provider.complete(said("a"))
    with pytest.raises(ProviderError, match=r"no reply left in inline script for call 2 .*'b'.*add a reply"):
        await provider.complete(said("b"))


@pytest.mark.anyio
async def test_streaming_deltas_join_to_the_content() -> None:
    provider = ScriptedProvider(["The answer  is 42."])
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    response = await provider.complete(said("q"), on_delta=on_delta)
    assert len(deltas) == 4 and "".join(deltas) == response.content == "The answer  is 42."


@pytest.mark.anyio
async def test_no_script_echoes_the_last_user_message() -> None:
    provider = ScriptedProvider(None)
    assert (await provider.complete(said("ping"))).content == "(scripted echo) ping"
    assert (await provider.complete(said("pong"))).content == "(scripted echo) pong"


@pytest.mark.anyio
async def test_script_is_read_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": [{"content": "from file"}]}))
    assert (await ScriptedProvider(path).complete(said("x"))).content == "from file"


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ({"replies": 3}, "a script is a list of replies"),
        ([{"content": "x", "tool_call": []}], r"replies\[0\] has unknown field\(s\) \['tool_call'\]"),
        ([{"tool_calls": [{"arguments": {}}]}], r"tool_calls\[0\]: a tool call is"),
        ([{"usage": {"prompt_tokens": "many"}}], "usage must be"),
    ],
)
def test_malformed_scripts_are_rejected_with_the_place_of_the_mistake(script: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        ScriptedProvider(script)  # type: ignore[arg-type]


def test_unreadable_or_invalid_files_say_which_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"cannot read the scripted-provider file .*missing\.json"):
        ScriptedProvider(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidInputError, match=r"bad\.json is not valid JSON"):
        ScriptedProvider(bad)


@pytest.mark.anyio
async def test_echo_skips_user_chunks_the_runtime_added() -> None:
    request = ModelRequest(
        messages=[
            Chunk(kind="user", content="the real question"),
            Chunk(kind="user", name="memory", content="[UNTRUSTED MEMORY] ..."),
        ]
    )
    assert (await ScriptedProvider(None).complete(request)).content == "(scripted echo) the real question"
