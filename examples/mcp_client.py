"""Using rath-mcp through an MCP client: the Python SDK launches ``rath-mcp serve`` over stdio.

The server is started exactly as a desktop host would start it, with the custom workflows of
``my_workflows.py`` loaded by ``--workflows``. The client lists the workflows, runs ``triage``
(a router picks the branch) and ``publish`` (it waits on an approval interrupt, which the client
resolves), reads a run's events as a resource and recalls what it remembered.

Run it:  python examples/mcp_client.py      (state goes to $RATH_HOME, else ~/.rath)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from runtime import resolve_home

WORKFLOWS = Path(__file__).resolve().parent / "my_workflows.py"


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool and return its structured result (raise with the tool's message on error)."""
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {' '.join(getattr(c, 'text', '') for c in result.content)}")
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def main() -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rath_mcp", "serve", "--home", str(resolve_home()), "--workflows", str(WORKFLOWS)],
    )
    async with Client(server) as client:
        names = [w["name"] for w in (await call(client, "workflow_list"))["workflows"]]
        print(f"connected ({client.protocol_version}); workflows: {', '.join(sorted(names))}")

        for text in ["Urgent: the site is down", "Typo on the About page"]:
            run = await call(client, "run_start", workflow="triage", input={"text": text}, wait_s=10)
            print(f"triage {text!r}: {run['status']} via {' -> '.join(await steps_taken(client, run['run_id']))}")

        run = await call(client, "run_start", workflow="publish", input={"topic": "picnic"}, message="Announce it.")
        run = await call(client, "run_wait", run_id=run["run_id"], timeout_s=10)
        (question,) = run["pending_interrupts"]
        print(f"publish is {run['status']}: {question['prompt']}")
        await call(client, "interrupt_resolve", interrupt_id=question["interrupt_id"], action="approve")
        run = await call(client, "run_wait", run_id=run["run_id"], timeout_s=10)
        print(f"publish after approval: {run['status']}")

        await call(client, "memory_remember", content="The picnic is on Saturday in the park.")
        hits = (await call(client, "memory_recall", query="when is the picnic"))["hits"]
        print(f"recall 'when is the picnic': {hits[0]['snippet'] if hits else 'nothing'}")


async def steps_taken(client: Client, run_id: str) -> list[str]:
    """The steps a run went through, read from the ``rath://runs/{run_id}/events`` resource."""
    contents = (await client.read_resource(f"rath://runs/{run_id}/events")).contents[0]
    events = json.loads(getattr(contents, "text", "[]"))
    if isinstance(events, dict):  # a page object rather than a bare list
        events = events.get("events", [])
    return [e["data"]["step"] for e in events if e["type"] == "step.completed"]


if __name__ == "__main__":
    anyio.run(main)
