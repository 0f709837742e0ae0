"""Turning a session into memory: its markdown transcript, and the ``Extractor`` protocol.

``commit`` archives the whole transcript and stores what an extractor picks out of it as
separate, short items (short items rank and read better than a whole conversation). The default
``HeuristicExtractor`` needs no model and is deterministic: it keeps what the user stated about
themselves or asked to be remembered, and the final assistant answer with its question. A
model-backed extractor is any object with ``async def __call__(self, chunks) -> list[str]``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

import anyio.to_thread

from runtime.sessions.model import Chunk, Session

MAX_EXTRACTED = 20
_QUESTION_CHARS = 300
_ANSWER_CHARS = 1500
_STATEMENT_CHARS = 500
#: A longer "sentence" (text without sentence ends, a pasted log) is not a statement about the user, and
#: the statement pattern's ``.*`` would cost about its length squared: such text is not searched.
_SENTENCE_CHARS = 1_000
#: Text this long is searched for statements on a worker thread (a long conversation takes ~0.2 s a
#: million characters), so the event loop goes on serving others meanwhile.
_INLINE_CHARS = 20_000


@runtime_checkable
class Extractor(Protocol):
    """Picks the texts worth remembering out of a conversation's chunks."""

    async def __call__(self, chunks: list[Chunk]) -> list[str]: ...


# A user sentence worth keeping: about the user (I/my/we, 我, 私/僕), a standing instruction
# (always/never, 总是/不要), or an explicit request to remember.
_STATEMENT = re.compile(
    r"""(
      \b(i|i'm|i've|i'd|my|we|we're|our|mine)\b .* \b(am|is|are|was|prefer|prefers|like|likes|love|hate|dislike|use|
         uses|using|work|works|working|live|lives|need|want|usually|always|never|called|named)\b
    | \b(always|never|please\ remember|remember\ that|remember:|note\ that|keep\ in\ mind|from\ now\ on)\b
    | 我(是|叫|在|的|喜欢|不喜欢|偏好|讨厌|习惯|用|使用|住|想|需要|们)
    | 记住|记得|总是|永远|不要|以后
    | (私|僕|俺)(は|の|が) | 好き|嫌い|覚えて|いつも|使って|住んで
    )""",
    re.IGNORECASE | re.VERBOSE,
)
# Latin sentence ends need a space after them (so "3.11" and "e.g." stay whole); CJK ones do not.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n+")


def _is_question(sentence: str) -> bool:
    return sentence.endswith(("?", "？", "吗", "か")) or sentence.endswith("吗。")


def _clip(value: str, limit: int) -> str:
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


def user_statements(chunks: Sequence[Chunk]) -> list[str]:
    """Sentences of user chunks that state facts or preferences, or ask to be remembered."""
    out: list[str] = []
    for chunk in chunks:
        if chunk.kind != "user":
            continue
        for sentence in _SENTENCE_END.split(chunk.content):
            sentence = sentence.strip()
            if 4 <= len(sentence) <= _SENTENCE_CHARS and not _is_question(sentence) and _STATEMENT.search(sentence):
                out.append(_clip(sentence, _STATEMENT_CHARS))
    return out


def final_answer(chunks: Sequence[Chunk]) -> str | None:
    """The last assistant text (not a bare tool call) with the user message it answered."""
    for i in range(len(chunks) - 1, -1, -1):
        chunk = chunks[i]
        if chunk.kind == "assistant" and chunk.content.strip():
            question = next((c.content for c in reversed(chunks[:i]) if c.kind == "user" and c.content.strip()), None)
            answer = "Answered: " + _clip(chunk.content, _ANSWER_CHARS)
            return answer if question is None else f"Asked: {_clip(question, _QUESTION_CHARS)}\n{answer}"
    return None


class HeuristicExtractor:
    """The default extractor: deterministic, no model (user statements + the final answer)."""

    def __init__(self, max_items: int = MAX_EXTRACTED) -> None:
        self.max_items = max_items

    async def __call__(self, chunks: list[Chunk]) -> list[str]:
        if sum(len(c.content) for c in chunks if c.kind == "user") <= _INLINE_CHARS:
            found = user_statements(chunks)
        else:
            found = await anyio.to_thread.run_sync(user_statements, chunks)
        answer = final_answer(chunks)
        if answer is not None:
            found.append(answer)
        return list(dict.fromkeys(found))[: self.max_items]


def transcript(session: Session) -> str:
    """The session as markdown: a header, then each chunk under a numbered heading."""
    created = datetime.fromtimestamp(session.created_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [f"# Session {session.id}", "", f"{len(session.chunks)} chunks, created {created}", ""]
    for n, chunk in enumerate(session.chunks, 1):
        label = chunk.kind + (f" ({chunk.name})" if chunk.name else "")
        if chunk.tool_call_id:
            label += f" for call {chunk.tool_call_id}"
        lines += [f"## {n}. {label}", ""]
        if chunk.content:
            lines += [chunk.content, ""]
        for call in chunk.tool_calls or ():
            lines += [f"- calls `{call.function.name}` (id {call.id}) with `{call.function.arguments}`", ""]
    return "\n".join(lines).rstrip() + "\n"


def transcript_body(markdown: str) -> str:
    """A transcript's chunk sections, without the header naming its session: an earlier snapshot
    of a conversation has a body that is a prefix of a later snapshot's."""
    start = markdown.find("\n## 1. ")
    return "" if start < 0 else markdown[start:]
