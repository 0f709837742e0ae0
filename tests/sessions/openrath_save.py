"""Run by tests/sessions/test_openrath_import.py with the OpenRath 2.0.0 environment's Python (it needs mcp<2).

Saves sessions the way OpenRath itself does (``SessionWriter``): a conversation with a system prompt,
a user message, an assistant turn calling two tools, their results and an answer, with usage; a fork of
it that goes on; prints the ids as JSON. Usage: ``python openrath_save.py OUT_DIR``.
"""

import json
import sys
from pathlib import Path

from rath.llm.chat_response import RathLLMTokenUsage, RathLLMToolCallFunction, RathLLMToolCallPart
from rath.session.chunk import (
    ChunkTable,
    assistant_turn_chunk,
    system_text_chunk,
    tool_feedback_chunk,
    user_text_chunk,
)
from rath.session.persistence.writer import SessionWriter
from rath.session.session import Session


def call(call_id: str, name: str, arguments: dict) -> RathLLMToolCallPart:
    text = json.dumps(arguments)
    return RathLLMToolCallPart(call_id, "function", RathLLMToolCallFunction(name, text, arguments, False))


def save(session: Session, out: Path) -> None:
    with SessionWriter(session, path=out / f"{session.id}.jsonl") as writer:
        for index, row in enumerate(session.chunk_table.rows):
            writer.write_chunk(index, row)


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rows = (
        system_text_chunk("You are a careful assistant."),
        user_text_chunk("What is in notes.txt, and how big is it?"),
        assistant_turn_chunk(
            tool_calls=(
                call("call_a", "read_file", {"path": "notes.txt"}),
                call("call_b", "stat", {"path": "notes.txt"}),
            ),
            content="Let me look.",
        ),
        tool_feedback_chunk("call_a", "read_file", "buy milk"),
        tool_feedback_chunk("call_b", "stat", '{"size": 9}'),
        assistant_turn_chunk(tool_calls=None, content="It says 'buy milk' (9 bytes)."),
    )
    usage = RathLLMTokenUsage(prompt_tokens=120, completion_tokens=30, total_tokens=150)
    root = Session(ChunkTable(rows=rows), cumulative_usage=usage)
    save(root, out)
    child = root.fork()
    child.chunk_table = child.chunk_table.extend(
        user_text_chunk("Now translate it to French."),
        assistant_turn_chunk(tool_calls=None, content="Acheter du lait."),
    )
    child.cumulative_usage = RathLLMTokenUsage(prompt_tokens=200, completion_tokens=40, total_tokens=240)
    save(child, out)
    print(json.dumps({"root": str(root.id), "fork": str(child.id)}))


if __name__ == "__main__":
    main()
