"""``rath-mcp demo``: a short guided tour of the server, driven through a real MCP client.

Offline and key-free: a temporary home, the real server, the SDK's client connected in memory.
Each step prints what it called and what came back, so a person sees the contract at work.
"""

from __future__ import annotations

import tempfile
import textwrap
from collections.abc import Callable
from typing import Any

from mcp import Client
from mcp_types import CallToolResult

from rath_mcp.server import build_server
from runtime import Runtime

Say = Callable[[str], None]
PLAN = "Picnic plan: sandwiches and fruit at Riverside Park, Saturday noon."


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
        shown = ", ".join(f"{k}={_short(v)}" for k, v in arguments.items())
        self.say(f"   → {tool}({shown})")
        result: CallToolResult = await self.client.call_tool(tool, arguments)
        if result.is_error or result.structured_content is None:
            text = " ".join(getattr(b, "text", "") for b in result.content)
            raise TourError(f"{tool} failed: {text}")
        content: dict[str, Any] = result.structured_content
        return content


def _short(value: Any, width: int = 48) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


async def tour_sessions(t: Tour) -> str:
    """Create, fork, append on each branch, merge; returns the merged session id."""
    t.heading("Sessions are immutable snapshots")
    base = await t.call("session_create", system="You are a careful planner.", message="Plan a picnic.")
    t.say(f"   ← {base['session_id']} ({base['length']} chunks)")

    t.heading("Fork: two branches share that history (O(1), nothing copied)")
    a, b = (await t.call("session_fork", session_id=base["session_id"], count=2))["session_ids"]
    t.say(f"   ← {a}\n   ← {b}")
    a = (await t.call("session_append", session_id=a, content="Branch A: bring sandwiches."))["session_id"]
    b = (await t.call("session_append", session_id=b, content="Branch B: bring fruit."))["session_id"]

    t.heading("Merge: the shared prefix once, then each branch's own chunks")
    merged = await t.call("session_merge", session_ids=[a, b])
    page = await t.call("session_get", session_id=merged["session_id"])
    for chunk in page["chunks"]:
        t.say(f"     [{chunk['kind']}] {chunk['content']}")
    return str(merged["session_id"])


async def tour_durable_run(t: Tour, session_id: str) -> None:
    """An approval run parks on an interrupt; a human's decision resumes it."""
    t.heading("A durable run that waits for a human (workflow `approval`)")
    run = await t.call("run_start", workflow="approval", session_id=session_id, input={"draft": PLAN}, wait_s=10)
    t.say(f"   ← {run['run_id']} is {run['status']} at step {run['step']}")
    interrupt = run["pending_interrupts"][0]
    t.say(f"     interrupt {interrupt['interrupt_id']} ({interrupt['kind']}): {interrupt['prompt'].splitlines()[0]}")
    t.say("     (the run is in the store now: a server restart here would lose nothing)")

    t.heading("The human approves; the run resumes and finishes")
    await t.call("interrupt_resolve", interrupt_id=interrupt["interrupt_id"], action="approve", reason="fine by me")
    done = await t.call("run_wait", run_id=run["run_id"], timeout_s=10)
    t.say(f"   ← {done['run_id']} {done['status']}; output session {done['output_session_id']}")
    events = await t.call("run_events", run_id=run["run_id"])
    types = [e["type"] for e in events["events"]]
    t.say(f"     {len(types)} events, in order: {types[0]} … {', '.join(dict.fromkeys(types[1:-1]))} … {types[-1]}")
    if done["status"] != "succeeded":
        raise TourError(f"the approval run ended {done['status']}: {done['error']}")


async def tour_memory(t: Tour, session_id: str) -> None:
    t.heading("Memory: remember facts, recall them by BM25")
    await t.call("memory_remember", content="The picnic is at Riverside Park on Saturday.", tags=["picnic"])
    await t.call("memory_remember", content="Bring an umbrella if rain is forecast.", tags=["weather"])
    committed = await t.call("memory_commit", session_id=session_id)
    t.say(f"   ← transcript archived at {committed['archived_uri']}")
    found = await t.call("memory_recall", query="picnic park", k=3)
    for hit in found["hits"]:
        t.say(f"     score {hit['score']:.3g}  {hit['uri']}\n       {hit['snippet'][:90]}")
    if not found["hits"]:
        raise TourError("recall found nothing")


async def tour_lineage(t: Tour, session_id: str) -> None:
    t.heading("Lineage: the DAG of snapshots, as Mermaid")
    graph = await t.call("session_lineage", session_id=session_id)
    t.say(textwrap.indent(graph["mermaid"], "     "))


async def run_demo(say: Say = print) -> int:
    """Run the whole tour on a throw-away home; 0 when every step worked."""
    with tempfile.TemporaryDirectory(prefix="rath-demo-") as home:
        async with Runtime.open(home) as rt:
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
                    await tour_lineage(tour, merged)
                except TourError as exc:
                    say(f"\ndemo failed: {exc}")
                    return 1
    say("\nDone: every step above went through MCP tools/call.")
    return 0
