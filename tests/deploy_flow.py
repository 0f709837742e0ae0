"""A workflow whose failed runs a fork can finish: the tests of what a forked run keeps (its origin's
``notify_url`` and ``priority``) start one without a target, watch it fail, and fork it with one."""

from __future__ import annotations

from typing import Any

from runtime import RunFailure, StepContext, Workflow, step


class Deploy(Workflow):
    """Builds, then deploys to state.target: fails without one (a fork with a target finishes it)."""

    @step(entry=True, successors=["deploy"])
    async def build(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {**state, "built": True}

    @step()
    async def deploy(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        if "target" not in state:
            raise RunFailure("no target to deploy to")
        return state
