"""A durable workflow that pauses on an interrupt and resumes when a human approves.

``Publish`` (from ``my_workflows.py``) drafts a note, then asks for approval. The run is stored:
state, events and a checkpoint are committed after every step, so it survives a restart while it
waits. Here the first runtime is closed while the run waits, a second one (a "restarted process")
resolves the interrupt, and the run finishes; the publish effect happened exactly once.

Run it:  python examples/durable_approval.py      (state goes to $RATH_HOME, else ~/.rath)
"""

from __future__ import annotations

import anyio
from my_workflows import Publish

from runtime import Runtime


async def main() -> None:
    async with Runtime.open() as rt:
        rt.workflows.register(Publish)
        session = await rt.sessions.create([{"kind": "user", "content": "Announce the picnic."}])
        run = await rt.runs.start("publish", session_id=session.id, input={"topic": "picnic on Saturday"})
        run = await rt.runs.wait(run.id, timeout_s=10)
        (question,) = run.pending_interrupts
        print(f"run {run.id} is {run.status} at step {run.step}: {question.kind} {question.prompt!r}")

    # A new process (here: a new runtime on the same home) picks the run up where it stopped.
    async with Runtime.open() as rt:
        rt.workflows.register(Publish)
        run = await rt.runs.resolve_interrupt(question.id, "approve", reason="looks good")
        run = await rt.runs.wait(run.id, timeout_s=10)
        print(f"after approval the run is {run.status}: published={run.state['published']}")
        print(f"receipt: {run.state['receipt']}")
        events = await rt.runs.events(run.id)
        print("events: " + ", ".join(e.type for e in events))


if __name__ == "__main__":
    anyio.run(main)
