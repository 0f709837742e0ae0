"""An agent with tools in a sandbox, run as the shipped durable ``agent`` workflow, fully offline.

The model here is the ``scripted`` provider (deterministic replies and tool calls from a script),
so the example needs no key or network; set ``RATH_PROVIDER=openai`` or ``anthropic`` (with its
key) and drop the script to use a real model. The agent's tools run in the session's sandbox,
confined to its workspace under the runtime home (the scripted agent's attempt to read outside it
comes back as a tool error); every tool call and result lands in the output session, whose usage
counts the tokens spent.

Run it:  python examples/agent_sandbox.py      (state goes to $RATH_HOME, else ~/.rath)
"""

from __future__ import annotations

import anyio

from runtime import Runtime
from runtime.providers import ScriptedProvider

SCRIPT = {
    "replies": [
        {
            "content": "I will write the list first.",
            "tool_calls": [{"name": "write_file", "arguments": {"path": "todo.txt", "content": "bread\nmilk\n"}}],
        },
        {
            "content": "Now I count the lines.",
            "tool_calls": [{"name": "run_command", "arguments": {"command": "wc -l < todo.txt"}}],
        },
        {
            "content": "Can I peek outside?",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "../../etc/passwd"}}],
        },
        {"content": "todo.txt is written and has 2 items."},
    ]
}


async def main() -> None:
    async with Runtime.open() as rt:
        rt.providers.register("default", ScriptedProvider(SCRIPT))
        run = await rt.runs.start("agent", input={"message": "Write a shopping list with bread and milk."})
        run = await rt.runs.wait(run.id, timeout_s=30)
        print(f"run {run.id}: {run.status}")
        assert run.output_session_id is not None, run.error
        session = await rt.sessions.get(run.output_session_id)
        for chunk in session.chunks:
            calls = ", ".join(f"{c.function.name}({c.function.arguments})" for c in chunk.tool_calls or ())
            print(f"  {chunk.kind:>11}: {chunk.content.strip()[:110]}{'  -> ' + calls if calls else ''}")
        where = f"{session.placement.backend} sandbox, workspace {session.placement.workspace or 'default'}"
        print(f"usage: {session.usage.total_tokens} tokens; ran in the {where}")


if __name__ == "__main__":
    anyio.run(main)
