"""Workflows of the multi-process PostgreSQL tests, loaded by worker processes with ``--workflows``.

``barrier`` dispatches one non-idempotent effect (a line appended to the ledger file its input
names: the test counts them) and then holds its step on a barrier the test controls: it connects
to the test's Unix socket, says which process it runs in, and waits for the test to answer. A
step cancelled or killed there never gets an answer; the step re-run elsewhere gets one at once.
"""

from __future__ import annotations

import os
from typing import Any

import anyio

from runtime import EffectClass, StepContext, Workflow, step


def append(ledger: str, line: str) -> str:
    """The effect the test counts: one line appended to a file."""
    with open(ledger, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    return line


async def barrier(socket_path: str) -> str:
    """Tell the test this process reached the barrier; return its answer (waits until it answers)."""
    async with await anyio.connect_unix(socket_path) as stream:
        await stream.send(f"{os.getpid()}\n".encode())
        return (await stream.receive()).decode().strip()


class Barrier(Workflow):
    """One step: a non-idempotent effect, then a barrier the test opens."""

    name = "barrier"

    @step(entry=True, effects=EffectClass.NON_IDEMPOTENT)
    async def pay(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        paid = await ctx.effect("pay", lambda: append(state["ledger"], ctx.run_id))
        answer = await barrier(state["socket"])
        return {**state, "paid": paid, "answer": answer}
