"""Workflows of the several-hosts test (``test_hosts.py``), loaded by its workers with ``--workflows``.

Every step that runs appends a line ``<run id> <step> <visit> <hostname>`` to the file its input names
(``ledger``): the test counts the lines, so a step driven twice, anywhere, shows. Hostnames are the
hosts' own (each worker runs in a UTS namespace named after its host).

``held``: a non-idempotent effect (a line in ``ledger`` + ``.paid``), then a barrier: the step tells
the test's Unix socket (``socket``) which host it runs on and waits for its answer; then one more step.
``hops``: ``input.steps`` steps that only write their line, then the end.
"""

from __future__ import annotations

import socket
from typing import Any

import anyio

from runtime import EffectClass, StepContext, Workflow, router, step


def _note(ledger: str, line: str) -> str:
    with open(ledger, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    return line


def _driven(state: dict[str, Any], ctx: StepContext, name: str) -> None:
    _note(state["ledger"], f"{ctx.run_id} {name} {ctx.visit} {socket.gethostname()}")


class Held(Workflow):
    """A paid effect and a barrier the test opens, then an end step."""

    name = "held"

    @step(entry=True, successors=["end"], effects=EffectClass.NON_IDEMPOTENT)
    async def pay(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        _driven(state, ctx, "pay")
        paid = await ctx.effect("pay", lambda: _note(state["ledger"] + ".paid", ctx.run_id))
        async with await anyio.connect_unix(state["socket"]) as stream:
            await stream.send(f"{ctx.run_id} {socket.gethostname()}\n".encode())
            answer = (await stream.receive()).decode().strip()
        return {**state, "paid": paid, "answer": answer}

    @step()
    async def end(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        _driven(state, ctx, "end")
        return state


class Hops(Workflow):
    """``input.steps`` steps that only note that they ran, then the end."""

    name = "hops"

    @router(entry=True, successors=["hop", "end"])
    async def hop(self, state: dict[str, Any], ctx: StepContext) -> str:
        _driven(state, ctx, "hop")
        return "hop" if ctx.visit < int(state["steps"]) else "end"

    @step()
    async def end(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        _driven(state, ctx, "end")
        return state
