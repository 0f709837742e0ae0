"""Long texts cost bounded work in memory: statements are looked for in sentences, not in pasted blobs,
and ASCII text is tokenized by a regex pass a piece at a time.

The default extractor searches each user sentence with a pattern whose cost grows with the square
of a sentence's length; text without sentence ends (a pasted log, a generated blob) is not a
statement about the user and is not searched. Commit still archives it whole, and recall finds it.
"""

from __future__ import annotations

import random
import string

import pytest

from runtime import Runtime
from runtime.memory.text import tokenize

pytestmark = pytest.mark.anyio


async def test_a_commit_keeps_statements_and_skips_a_blob_without_sentence_ends(rt: Runtime) -> None:
    blob = "I prefer " + "x" * 5_000 + " always"  # one 5,000-character "sentence"
    session = await rt.sessions.create(
        [{"kind": "user", "content": "I prefer green tea. " + blob}, {"kind": "assistant", "content": "Noted."}]
    )
    result = await rt.memory.commit(session.id)
    extracted = [item.content for item in result.items]
    assert "I prefer green tea." in extracted
    assert not any("xxxx" in text and not text.startswith("Asked:") for text in extracted)
    hits = await rt.memory.recall("always", scope="session")  # a word found only in the blob: archived whole
    assert [h.uri for h in hits] == [result.archived_uri]


async def test_a_commit_of_a_long_conversation_finds_its_statements(rt: Runtime) -> None:
    """Past the inline size the search runs on a worker thread and finds the same statements."""
    filler = "The weather report said rain. " * 2_000
    session = await rt.sessions.create(
        [{"kind": "user", "content": filler + "My name is Ann. " + filler}, {"kind": "assistant", "content": "Hi Ann."}]
    )
    extracted = [item.content for item in (await rt.memory.commit(session.id)).items]
    assert "My name is Ann." in extracted


def test_ascii_text_is_tokenized_as_any_text_is() -> None:
    """ASCII takes a fast path (a regex pass a piece at a time); it must give exactly the general path's terms.

    The general path is reached by adding one non-ASCII word ("é", a term of its own) at the end."""
    rnd = random.Random(7)
    alphabet = string.ascii_letters + string.digits + " _-.,\n\t'\"!?/"
    texts = ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 300))) for _ in range(500)]
    texts += ["a" * 100_000 + " tail", " ".join(f"w{i:07d}" for i in range(30_000)), "x" * 70_000]
    for text in texts:
        assert tokenize(text) == tokenize(text + " é")[:-1], text[:80]
