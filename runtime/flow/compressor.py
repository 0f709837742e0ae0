"""``Compressor``: summarise a session's older chunks into one, giving a shorter session (lineage op ``compress``).

Leading ``system`` chunks and the last ``keep_last`` chunks are kept as they are; everything between
is replaced by one summary chunk written by the model. The cut never separates a tool result from
the assistant message that called it. The new session's parent is the original (nothing is lost:
the full history stays reachable through lineage), and its usage is the original's plus the cost of
the summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runtime.errors import InvalidInputError
from runtime.providers.base import ModelRequest, Provider
from runtime.sessions.model import Chunk, SessionInfo, Usage

if TYPE_CHECKING:
    from runtime.flow.services import Services

SUMMARY_NAME = "summary"
DEFAULT_INSTRUCTIONS = (
    "Summarise the conversation transcript you are given for a colleague who will continue the work. "
    "Keep facts, decisions, names of files and tools, results, and open questions. Plain prose, no preamble."
)


@dataclass(frozen=True)
class CompressResult:
    """The shorter session, its summary text, and how many chunks were replaced and kept."""

    session: SessionInfo
    summary: str
    replaced: int
    kept: int
    usage: Usage


def transcript(chunks: Sequence[Chunk]) -> str:
    """Chunks as plain text, one block per chunk, tool calls and results spelled out."""
    blocks = []
    for chunk in chunks:
        label = chunk.kind + (f" ({chunk.name})" if chunk.name else "")
        text = chunk.content
        for call in chunk.tool_calls or ():
            text += f"\n-> calls {call.function.name}({call.function.arguments})"
        blocks.append(f"[{label}]\n{text}")
    return "\n\n".join(blocks)


def split_point(chunks: Sequence[Chunk], keep_last: int) -> tuple[int, int]:
    """(end of the leading system chunks, start of the kept tail) for a session's chunks."""
    lead = 0
    while lead < len(chunks) and chunks[lead].kind == "system":
        lead += 1
    tail = max(lead, len(chunks) - keep_last)
    while lead < tail < len(chunks) and chunks[tail].kind == "tool_result":
        tail -= 1  # keep a tool result together with the call that produced it
    return lead, tail


class Compressor:
    """Replace a session's older chunks by a model-written summary."""

    def __init__(
        self, provider: Provider, *, keep_last: int = 4, instructions: str = DEFAULT_INSTRUCTIONS, max_tokens: int = 600
    ) -> None:
        if keep_last < 0:
            raise InvalidInputError(f"keep_last must be zero or more, got {keep_last}")
        self.provider = provider
        self.keep_last = keep_last
        self.instructions = instructions
        self.max_tokens = max_tokens

    async def compress(self, rt: Services, session_id: str) -> CompressResult:
        """A new session (op ``compress``, parent ``session_id``) with the middle summarised."""
        session = await rt.sessions.get(session_id)
        chunks = list(session.chunks)
        lead, tail = split_point(chunks, self.keep_last)
        middle = chunks[lead:tail]
        if len(middle) < 2:
            raise InvalidInputError(
                f"session {session_id} has {len(middle)} chunk(s) to summarise once {lead} system and "
                f"{len(chunks) - tail} recent chunk(s) are kept; nothing to compress (lower keep_last)"
            )
        request = ModelRequest(
            [Chunk(kind="user", content=transcript(middle))], self.instructions, max_tokens=self.max_tokens
        )
        response = await self.provider.complete(request)
        summary = Chunk(
            kind="system",
            name=SUMMARY_NAME,
            content=f"Summary of {len(middle)} earlier chunks of this conversation:\n{response.content}",
        )
        info = await rt.sessions.derive(
            [session_id],
            [*chunks[:lead], summary, *chunks[tail:]],
            op="compress",
            usage=session.usage + response.usage,
            metadata={**session.metadata, "compressed": {"from": session_id, "replaced": len(middle)}},
        )
        return CompressResult(info, response.content, len(middle), len(chunks) - tail, response.usage)
