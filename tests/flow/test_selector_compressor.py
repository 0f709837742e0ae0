"""Selector picks the next workflow (falling back clearly); Compressor shortens a session with lineage op compress."""

from __future__ import annotations

import json

import pytest

from runtime import Runtime
from runtime.errors import InvalidInputError
from runtime.flow.compressor import Compressor, split_point
from runtime.flow.selector import Choice, Selector
from runtime.providers import ScriptedProvider
from runtime.sessions.model import Chunk
from tests.flow.conftest import Recording

CHOICES = [
    Choice("planner", "breaks a task into steps"),
    Choice("coder", "writes and runs code"),
    Choice("reviewer", "checks finished work"),
]
ASK = [Chunk(kind="user", content="Please fix the failing test in parser.py")]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ({"tool_calls": [{"name": "choose", "arguments": {"name": "coder", "reason": "code change"}}]}, "coder"),
        ({"content": "reviewer"}, "reviewer"),
        ({"content": " `Planner`. "}, "planner"),
        ({"content": '{"choice": "coder"}'}, "coder"),
        ({"content": "I think the coder should take this one."}, "coder"),
    ],
)
async def test_selector_reads_the_models_choice(reply: dict[str, object], expected: str) -> None:
    provider = Recording(ScriptedProvider([reply]))
    selection = await Selector(provider, CHOICES).choose(ASK)
    assert (selection.name, selection.fallback) == (expected, False)
    request = provider.requests[0]
    assert request.tools[0].parameters["properties"]["name"]["enum"] == ["planner", "coder", "reviewer"]
    assert "- coder: writes and runs code" in (request.system or "")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "reply",
    [
        {"content": "No idea, honestly."},
        {"content": "either the planner or the coder"},
        {"tool_calls": [{"name": "choose", "arguments": {"name": "designer"}}]},
    ],
)
async def test_an_unusable_answer_falls_back_and_says_why(reply: dict[str, object]) -> None:
    selection = await Selector(ScriptedProvider([reply]), CHOICES, default="reviewer").choose(ASK)
    assert selection.name == "reviewer" and selection.fallback
    assert "names none (or several) of ['planner', 'coder', 'reviewer']; fell back to 'reviewer'" in selection.reason


def test_selector_rejects_bad_setups() -> None:
    with pytest.raises(InvalidInputError, match="at least one choice"):
        Selector(ScriptedProvider(None), [])
    with pytest.raises(InvalidInputError, match="default 'boss' is not one of the choices"):
        Selector(ScriptedProvider(None), CHOICES, default="boss")


@pytest.mark.anyio
async def test_selector_over_registered_workflows(rt: Runtime) -> None:
    selector = Selector.from_workflows(rt, ScriptedProvider(["approval"]), names=["echo", "approval"])
    assert selector.names == ["approval", "echo"]
    start = await rt.sessions.create([{"kind": "user", "content": "needs sign-off"}])
    assert (await selector.select(rt, start.id)).name == "approval"


def _long_conversation() -> list[dict[str, object]]:
    call = {"id": "call_9", "type": "function", "function": {"name": "run_command", "arguments": '{"command": "ls"}'}}
    return [
        {"kind": "system", "content": "You are helpful."},
        {"kind": "user", "content": "List the files."},
        {"kind": "assistant", "content": "Listing.", "tool_calls": [call]},
        {"kind": "tool_result", "content": "a.py b.py", "tool_call_id": "call_9", "name": "run_command"},
        {"kind": "assistant", "content": "There are a.py and b.py."},
        {"kind": "user", "content": "Open a.py."},
        {"kind": "assistant", "content": "Opening.", "tool_calls": [call]},
        {"kind": "tool_result", "content": "print('a')", "tool_call_id": "call_9", "name": "run_command"},
    ]


@pytest.mark.anyio
async def test_compress_summarises_the_middle_and_keeps_lineage_and_usage(rt: Runtime) -> None:
    start = await rt.sessions.create(_long_conversation())
    provider = Recording(
        ScriptedProvider(
            [{"content": "User listed files a.py and b.py.", "usage": {"prompt_tokens": 40, "completion_tokens": 9}}]
        )
    )
    result = await Compressor(provider, keep_last=1).compress(rt, start.id)

    compressed = await rt.sessions.get(result.session.id)
    assert compressed.op == "compress" and compressed.parents == (start.id,)
    assert [c.kind for c in compressed.chunks] == ["system", "system", "assistant", "tool_result"]
    assert compressed.chunks[0].content == "You are helpful."
    assert compressed.chunks[1].name == "summary" and "User listed files a.py and b.py." in compressed.chunks[1].content
    assert compressed.chunks[3].content == "print('a')"  # the kept tail starts at the call, not at its result
    assert (result.replaced, result.kept) == (5, 2)
    assert compressed.usage.total_tokens == 49
    seen = provider.requests[0].messages[0].content
    assert "[tool_result (run_command)]\na.py b.py" in seen and "-> calls run_command" in seen
    assert "Open a.py" in seen and "print('a')" not in seen  # the kept tail is not summarised
    assert compressed.metadata["compressed"] == {"from": start.id, "replaced": 5}


@pytest.mark.anyio
async def test_compress_refuses_when_there_is_nothing_to_summarise(rt: Runtime) -> None:
    start = await rt.sessions.create([{"kind": "user", "content": "hi"}, {"kind": "assistant", "content": "hello"}])
    with pytest.raises(InvalidInputError, match="nothing to compress"):
        await Compressor(ScriptedProvider(None), keep_last=1).compress(rt, start.id)


def test_split_point_never_starts_the_tail_on_a_tool_result() -> None:
    chunks = [Chunk.model_validate(c) for c in _long_conversation()]
    assert split_point(chunks, 0) == (1, 8)
    assert split_point(chunks, 1) == (1, 6)
    assert split_point(chunks, 3) == (1, 5)
    assert json.loads(chunks[6].tool_calls[0].function.arguments) == {"command": "ls"}  # type: ignore[index]


@pytest.mark.anyio
async def test_the_question_comes_last_and_an_echo_falls_back() -> None:
    provider = Recording(ScriptedProvider(None))
    selection = await Selector(provider, CHOICES, default="planner").choose(ASK)
    assert provider.requests[0].messages[-1].content == "Who should act next? One of: planner, coder, reviewer."
    assert selection.fallback and selection.name == "planner"
