"""``rath-mcp demo``: a short guided tour of the server, driven through a real MCP client.

Offline and key-free: a temporary home, the real server, the SDK's client connected in memory.
Each step prints the tool it called (``→``) and what came back (``←``), so a person sees the
contract at work. Every id shown is shown whole, and every id passed to a tool was shown before.

The agent step needs a model; the demo has none, so it chooses the ``scripted`` provider for that
run (replies and tool calls from ``AGENT_SCRIPT``) and says so. The tools the script calls are
real: they run in the session's sandbox and their real output is printed.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import textwrap
from collections.abc import Callable
from typing import Any

from mcp import Client
from mcp_types import CallToolResult

from rath_mcp.server import build_server
from runtime import Runtime
from runtime.providers import ScriptedProvider

Say = Callable[[str], None]
PLAN = "Picnic plan: sandwiches and fruit at Riverside Park, Saturday noon."
ID = re.compile(r"^(ses|run|int|mem|eff)_[0-9a-f]{24}$")
TEXT_WIDTH = 44

AGENT_TASK = "Write a script that prints the picnic's shopping list, run it, and check the file."
AGENT_SCRIPT = {
    "replies": [
        {
            "content": "I will write the script.",
            "tool_calls": [
                {
                    "name": "write_file",
                    "arguments": {
                        "path": "shopping.py",
                        "content": "for item in ['bread', 'fruit']:\n    print(item)\n",
                    },
                }
            ],
        },
        {
            "content": "Now I run it.",
            "tool_calls": [{"name": "run_command", "arguments": {"command": "python3 shopping.py"}}],
        },
        {
            "content": "And check what is in the workspace.",
            "tool_calls": [{"name": "list_files", "arguments": {"path": "."}}],
        },
        {"content": "shopping.py is written; running it printed the list."},
    ]
}


class TourError(RuntimeError):
    """A demo step failed: the tour stops and says which."""


class Tour:
    """The client side of the demo: call a tool, print a line, hand back the structured result."""

    def __init__(self, client: Client, say: Say) -> None:
        self.client = client
        self.say = say
        self.step = 0

    def heading(self, title: str) -> None:
        self.step += 1
        self.say(f"\n{self.step}. {title}")

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        shown = ", ".join(f"{k}={show(v)}" for k, v in arguments.items())
        self.say(f"   → {tool}({shown})")
        result: CallToolResult = await self.client.call_tool(tool, arguments)
        if result.is_error or result.structured_content is None:
            text = " ".join(getattr(b, "text", "") for b in result.content)
            raise TourError(f"{tool} failed: {text}")
        content: dict[str, Any] = result.structured_content
        return content


def show(value: Any) -> str:
    """An argument as the reader should see it: ids whole (they are passed on), long text cut."""
    if isinstance(value, str):
        if ID.match(value):
            return value
        return repr(value if len(value) <= TEXT_WIDTH else value[: TEXT_WIDTH - 1] + "…")
    if isinstance(value, list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {show(v)}" for k, v in value.items()) + "}"
    return repr(value)


async def tour_sessions(t: Tour) -> str:
    """Create, fork, append on each branch, merge; returns the merged session id."""
    t.say("(below, → is a tool call the client makes and ← what the server answered)")
    t.heading("Sessions are immutable snapshots: every change makes a new id")
    base = await t.call("session_create", system="You are a careful planner.", message="Plan a picnic.")
    t.say(f"   ← {base['session_id']} ({base['length']} chunks)")

    t.heading("Fork: two branches share that history (O(1), nothing copied)")
    a, b = (await t.call("session_fork", session_id=base["session_id"], count=2))["session_ids"]
    t.say(f"   ← {a} and {b}")
    branches = []
    for branch, text in ((a, "Branch A: bring sandwiches."), (b, "Branch B: bring fruit.")):
        appended = await t.call("session_append", session_id=branch, content=text)
        t.say(f"   ← {appended['session_id']} (a new snapshot; {branch} is unchanged)")
        branches.append(appended["session_id"])

    t.heading("Merge: the shared prefix once, then each branch's own chunks")
    merged = await t.call("session_merge", session_ids=branches)
    t.say(f"   ← {merged['session_id']}")
    page = await t.call("session_get", session_id=merged["session_id"])
    for chunk in page["chunks"]:
        t.say(f"     [{chunk['kind']}] {chunk['content']}")
    return str(merged["session_id"])


async def tour_durable_run(t: Tour, session_id: str) -> None:
    """An approval run parks on an interrupt; a human's decision resumes it."""
    t.heading("A durable run that waits for a human (workflow `approval`)")
    run = await t.call("run_start", workflow="approval", session_id=session_id, input={"draft": PLAN}, wait_s=10)
    t.say(f"   ← {run['run_id']} is {run['status']} at step {run['step']}")
    if not run["pending_interrupts"]:
        raise TourError(f"the approval run did not stop for a human: {run['status']} {run['error']}")
    interrupt = run["pending_interrupts"][0]
    t.say(f"     it asks ({interrupt['kind']}, {interrupt['interrupt_id']}): {interrupt['prompt'].splitlines()[0]}")
    t.say("     (the run is in the store now: a server restart here would lose nothing)")

    t.heading("The human approves; the run resumes and finishes")
    await t.call("interrupt_resolve", interrupt_id=interrupt["interrupt_id"], action="approve", reason="fine by me")
    done = await t.call("run_wait", run_id=run["run_id"], timeout_s=10)
    t.say(f"   ← {done['run_id']} {done['status']}; output session {done['output_session_id']}")
    if done["status"] != "succeeded":
        raise TourError(f"the approval run ended {done['status']}: {done['error']}")
    events = await t.call("run_events", run_id=run["run_id"])
    kinds = list(dict.fromkeys(e["type"] for e in events["events"]))
    t.say(f"   ← {len(events['events'])} events in its journal, of these kinds (first seen first):")
    t.say(textwrap.indent(textwrap.fill(", ".join(kinds), 90), "     "))


async def tour_memory(t: Tour, session_id: str) -> None:
    t.heading("Memory: remember facts, recall them ranked by BM25")
    for content, tag in (
        ("The picnic is at Riverside Park on Saturday.", "picnic"),
        ("Bring an umbrella if rain is forecast.", "weather"),
    ):
        item = await t.call("memory_remember", content=content, tags=[tag])
        t.say(f"   ← {item['memory_id']} at {item['uri']}")
    committed = await t.call("memory_commit", session_id=session_id)
    t.say(f"   ← the transcript is archived at {committed['archived_uri']}")
    found = await t.call("memory_recall", query="picnic park", k=3)
    t.say("   ← best first (a higher score shares more, rarer query words):")
    for hit in found["hits"]:
        t.say(f"     score {hit['score']:.2f}  {hit['uri']}\n                 {hit['snippet'][:80]}")
    if not found["hits"]:
        raise TourError("recall found nothing")


def _tool_line(chunk: dict[str, Any]) -> str:
    """One line for an agent's step: what it said and which tools it called with what."""
    calls = [
        f"{c['function']['name']}({textwrap.shorten(c['function']['arguments'], 60, placeholder='…')})"
        for c in chunk.get("tool_calls") or ()
    ]
    said = chunk["content"].strip()
    return "  ".join(part for part in (said, "→ " + ", ".join(calls) if calls else "") if part)


def _result_line(content: str) -> str:
    """A tool result, shortened for the screen: a command's output as it printed it."""
    try:
        value = json.loads(content)
    except ValueError:
        return content.strip()
    if isinstance(value, dict) and "exit_code" in value:
        out = value.get("stdout", "").strip().replace("\n", " | ")
        return f"exit {value['exit_code']}, printed: {out}" + (
            f"; stderr: {value['stderr'].strip()}" if value.get("stderr") else ""
        )
    if isinstance(value, dict) and "entries" in value:
        return "files: " + ", ".join(f"{e['name']} ({e['size']} bytes)" for e in value["entries"])
    return textwrap.shorten(content, 100)


async def tour_agent(t: Tour) -> None:
    """The ``agent`` workflow on a scripted model, calling real tools in its session's workspace."""
    t.heading("An agent using tools in its sandbox (workflow `agent`)")
    t.say("     Its model here is the `scripted` provider, chosen for this demo (a script of replies, so it runs")
    t.say("     offline); the tools it calls are real and run in the session's workspace. With a real model")
    t.say("     configured (RATH_PROVIDER, or the client's own model via sampling) the same call works unchanged.")
    created = await t.call("session_create", message=AGENT_TASK, workspace="picnic")
    t.say(f"   ← {created['session_id']}")
    inp = {"provider": "scripted", "memory": False}
    run = await t.call("run_start", workflow="agent", session_id=created["session_id"], input=inp, wait_s=30)
    t.say(f"   ← {run['run_id']} {run['status']}; output session {run['output_session_id']}")
    if run["status"] != "succeeded":
        raise TourError(f"the agent run ended {run['status']}: {run['error']}")
    page = await t.call("session_get", session_id=run["output_session_id"])
    t.say(
        f"   ← what the agent did ({page['placement']['backend']} sandbox, workspace {page['placement']['workspace']}):"
    )
    for chunk in page["chunks"]:
        if chunk["kind"] == "assistant":
            t.say(f"     agent:  {_tool_line(chunk)}")
        elif chunk["kind"] == "tool_result":
            t.say(f"     {chunk.get('name') or 'tool'}:  {_result_line(chunk['content'])}")


async def tour_lineage(t: Tour, session_id: str) -> None:
    t.heading("Lineage: the DAG of snapshots, as Mermaid (paste it into any Mermaid viewer)")
    graph = await t.call("session_lineage", session_id=session_id)
    t.say(textwrap.indent(graph["mermaid"], "     "))


async def run_demo(say: Say = print) -> int:
    """Run the whole tour on a throw-away home; 0 when every step worked."""
    with tempfile.TemporaryDirectory(prefix="rath-demo-") as home:
        async with Runtime.open(home) as rt:
            rt.providers.register("scripted", ScriptedProvider(AGENT_SCRIPT))  # chosen by the agent step's input
            server = build_server(rt)
            async with Client(server, mode="legacy") as client:
                info = client.server_info
                say(f"rath-mcp demo: connected to {info.name if info else '?'} {info.version if info else ''}")
                say("(a real MCP client talking to the real server in memory; offline, no keys)")
                say(f"(tool commands run with isolation: {rt.sandboxes.isolation})")
                tour = Tour(client, say)
                try:
                    merged = await tour_sessions(tour)
                    await tour_durable_run(tour, merged)
                    await tour_memory(tour, merged)
                    await tour_agent(tour)
                    await tour_lineage(tour, merged)
                except TourError as exc:
                    say(f"\ndemo failed: {exc}")
                    return 1
                except BrokenPipeError:  # the reader stopped reading (`rath-mcp demo | head`): not a failure
                    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so exit's flush is quiet
                    return 0
    say("\nDone: every step above went through MCP tools/call. Next: `rath-mcp serve` in your MCP host.")
    return 0
