"""Workflows of ``bench/scale.py``, loaded by its worker processes with ``--workflows bench.scale_flows``.

``wait_steps``: ``input.steps`` steps, each waiting 0.1 s (a model call's stand-in) and committing.
``noop_steps``: ``input.steps`` steps that do nothing but commit: what a durable step costs.
Each is a router that routes back to itself (a step per visit, each one commit with its events and
checkpoint), then one last step that ends the run.
"""

from __future__ import annotations

from typing import Any

import anyio

from runtime import StepContext, Workflow, router, step

WAIT_S = 0.1


class WaitSteps(Workflow):
    """``input.steps`` steps, each waiting ``WAIT_S`` seconds, then the end."""

    name = "wait_steps"

    @router(entry=True, successors=["wait", "end"])
    async def wait(self, state: dict[str, Any], ctx: StepContext) -> str:
        await anyio.sleep(WAIT_S)
        return "wait" if ctx.visit < int(state["steps"]) else "end"

    @step()
    async def end(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return state


class NoopSteps(Workflow):
    """``input.steps`` steps that do nothing, then the end."""

    name = "noop_steps"

    @router(entry=True, successors=["tick", "end"])
    async def tick(self, state: dict[str, Any], ctx: StepContext) -> str:
        return "tick" if ctx.visit < int(state["steps"]) else "end"

    @step()
    async def end(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return state
