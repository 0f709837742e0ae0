"""Commit: the transcript is archived, extracted items are remembered, all in one transaction."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import Chunk, InvalidInputError, NotFoundError, Runtime
from runtime.memory import Extractor, HeuristicExtractor

pytestmark = pytest.mark.anyio

CONVERSATION: list[dict[str, Any]] = [
    {"kind": "system", "content": "You are a helpful assistant."},
    {"kind": "user", "content": "Hi! My name is Ada and I work at Acme. How do I list files?"},
    {
        "kind": "assistant",
        "content": "",
        "tool_calls": [{"id": "call_1", "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}}],
    },
    {"kind": "tool_result", "content": "a.txt b.txt", "tool_call_id": "call_1", "name": "shell"},
    {"kind": "assistant", "content": "Use `ls`; here it shows a.txt and b.txt."},
    {"kind": "user", "content": "Thanks. Please remember that I prefer tabs. Can you show hidden files?"},
    {"kind": "assistant", "content": "Use `ls -a` to include hidden files."},
]


class KeywordExtractor:
    """A real extractor of our protocol: keeps user sentences containing a keyword."""

    def __init__(self, keyword: str) -> None:
        self.keyword = keyword
        self.seen: list[Chunk] = []

    async def __call__(self, chunks: list[Chunk]) -> list[str]:
        self.seen = chunks
        return [c.content for c in chunks if c.kind == "user" and self.keyword in c.content]


async def test_commit_archives_the_transcript_and_extracts_items(rt: Runtime) -> None:
    session = await rt.sessions.create(CONVERSATION)
    result = await rt.memory.commit(session.id)
    assert result.archived_uri == f"memory://session/{session.id}/transcript"
    archived = await rt.memory.read(result.archived_uri)
    assert archived.source == session.id and archived.tags == ("transcript",)
    assert archived.content.startswith(f"# Session {session.id}")
    for text in ["## 3. assistant", "calls `shell` (id call_1)", "## 4. tool_result (shell) for call call_1", "ls -a"]:
        assert text in archived.content
    contents = [i.content for i in result.items]
    assert result.extracted_count == len(result.items) == 3
    assert "My name is Ada and I work at Acme." in contents
    assert "Please remember that I prefer tabs." in contents
    assert "Asked: Thanks. Please remember that I prefer tabs. Can you show hidden files?\n" in contents[-1]
    assert contents[-1].endswith("Answered: Use `ls -a` to include hidden files.")
    assert not any("How do I list files" in c for c in contents[:-1])  # questions are not facts
    for item in result.items:
        assert item.uri.startswith(f"memory://session/{session.id}/") and item.source == session.id
    hits = await rt.memory.recall("Acme", scope="session", k=10)
    assert {h.uri for h in hits} == {result.archived_uri, result.items[0].uri}  # the transcript is searchable too


async def test_commit_is_idempotent_for_the_same_session(rt: Runtime) -> None:
    session = await rt.sessions.create(CONVERSATION)
    first = await rt.memory.commit(session.id)
    second = await rt.memory.commit(session.id)
    assert [i.id for i in second.items] == [i.id for i in first.items]
    assert len(await rt.memory.list(f"memory://session/{session.id}/")) == 1 + first.extracted_count


async def test_a_fact_already_extracted_from_an_earlier_snapshot_is_not_stored_twice(rt: Runtime) -> None:
    first = await rt.sessions.create(CONVERSATION[:2])
    one = await rt.memory.commit(first.id, scope="user")
    later = await rt.sessions.append(first.id, [{"kind": "user", "content": "I live in Lyon."}])
    two = await rt.memory.commit(later.id, scope="user")
    ada = "My name is Ada and I work at Acme."
    assert [i.content for i in two.items] == [ada, "I live in Lyon."]
    assert two.items[0].id == one.items[0].id and two.items[0].source == first.id
    assert [i.content for i in await rt.memory.list("memory://user/")].count(ada) == 1
    assert len(await rt.memory.list("memory://session/")) == 2  # each snapshot's transcript is archived


async def test_earlier_snapshots_of_a_conversation_leave_the_index_but_stay_readable(rt: Runtime) -> None:
    first = await rt.sessions.create(CONVERSATION[:2])
    one = await rt.memory.commit(first.id)
    later = await rt.sessions.append(first.id, [{"kind": "assistant", "content": "Hello Ada."}])
    two = await rt.memory.commit(later.id)
    assert two.superseded == (one.archived_uri,)
    transcripts = [h.uri for h in await rt.memory.recall("Acme", k=10) if h.uri.endswith("/transcript")]
    assert transcripts == [two.archived_uri]
    old = await rt.memory.read(one.archived_uri)
    assert old.tags == ("transcript", "superseded") and "Acme" in old.content
    assert (await rt.memory.commit(later.id)).superseded == ()  # nothing left to supersede
    other = await rt.sessions.create([{"kind": "user", "content": "My team is Acme platform."}])
    branch = await rt.sessions.append(other.id, [{"kind": "assistant", "content": "Noted."}])
    await rt.memory.commit(other.id)
    assert (await rt.memory.commit(branch.id)).superseded == (f"memory://session/{other.id}/transcript",)
    edited = await rt.sessions.derive(
        [later.id], [{"kind": "user", "content": "Something else, about Acme."}], op="run"
    )
    assert (await rt.memory.commit(edited.id)).superseded == ()  # not a continuation: both stay searchable


async def test_commit_puts_extracted_items_in_the_chosen_scope_with_a_custom_extractor(rt: Runtime) -> None:
    session = await rt.sessions.create(CONVERSATION)
    extractor = KeywordExtractor("tabs")
    assert isinstance(extractor, Extractor)
    result = await rt.memory.commit(session.id, scope="user", extractor=extractor)
    assert len(extractor.seen) == len(CONVERSATION)
    assert [i.uri.rsplit("/", 1)[0] for i in result.items] == [f"memory://user/{session.id}"]
    assert (await rt.memory.recall("tabs", scope="user"))[0].memory_id == result.items[0].id


async def test_version_numbers_do_not_end_a_sentence() -> None:
    found = await HeuristicExtractor()([Chunk(kind="user", content="I use Python 3.11 on Fly.io. Never on Fridays!")])
    assert found == ["I use Python 3.11 on Fly.io.", "Never on Fridays!"]


async def test_chinese_and_japanese_statements_are_extracted() -> None:
    chunks = [
        Chunk(kind="user", content="我叫小明。我喜欢喝绿茶。今天天气怎么样？"),
        Chunk(kind="user", content="私はラーメンが好きです。明日は晴れですか？"),
        Chunk(kind="assistant", content="明日は晴れです。"),
    ]
    found = await HeuristicExtractor()(chunks)
    assert found[:3] == ["我叫小明。", "我喜欢喝绿茶。", "私はラーメンが好きです。"]
    assert found[3].endswith("Answered: 明日は晴れです。")


async def test_a_failing_commit_writes_nothing(rt: Runtime) -> None:
    session = await rt.sessions.create(CONVERSATION)

    class TooLong:
        async def __call__(self, chunks: list[Chunk]) -> list[str]:
            return ["fine", "x" * 300_000]

    class NotStrings:
        async def __call__(self, chunks: list[Chunk]) -> list[str]:
            return [1, 2]  # type: ignore[list-item]

    with pytest.raises(InvalidInputError, match="split it"):
        await rt.memory.commit(session.id, extractor=TooLong())
    with pytest.raises(InvalidInputError, match="list of strings"):
        await rt.memory.commit(session.id, extractor=NotStrings())
    assert await rt.memory.list() == []


async def test_commit_of_an_unknown_session_or_scope_is_refused(rt: Runtime) -> None:
    with pytest.raises(NotFoundError):
        await rt.memory.commit("ses_0123456789abcdef01234567")
    session = await rt.sessions.create(CONVERSATION)
    with pytest.raises(InvalidInputError, match="not one of"):
        await rt.memory.commit(session.id, scope="team")
    assert await rt.memory.list() == []
