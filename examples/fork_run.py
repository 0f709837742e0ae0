"""Fork a failed run from its checkpoint, fix its state with a patch, and let it finish.

``Deploy`` builds an artifact (an effect), then deploys it to ``state["target"]``; started without a
target, the deploy step fails. Forking the run from the checkpoint after ``build`` with the patch
``{"target": "staging"}`` starts a new run at ``deploy``: the build is not done again, and the new
run's ``result`` says what it produced and ``forked_from`` where it came from.

Run it:  python examples/fork_run.py      (state goes to $RATH_HOME, else ~/.rath)
"""

from __future__ import annotations

from typing import Any

import anyio

from runtime import EffectClass, RunFailure, Runtime, StepContext, Workflow, step


class Deploy(Workflow):
    """Build an artifact, then deploy it to state.target."""

    name = "deploy"

    @step(entry=True, effects=EffectClass.IDEMPOTENT, successors=["deploy"])
    async def build(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        artifact = await ctx.effect("build", lambda: f"app-{state['version']}.tar", EffectClass.IDEMPOTENT)
        return {**state, "artifact": artifact}

    @step(effects=EffectClass.IDEMPOTENT)
    async def deploy(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        if "target" not in state:
            raise RunFailure("no target to deploy to: set state.target")
        return {**state, "deployed_to": state["target"]}

    def result(self, state: dict[str, Any]) -> dict[str, Any]:
        return {"artifact": state["artifact"], "deployed_to": state["deployed_to"]}


async def main() -> None:
    async with Runtime.open() as rt:
        rt.workflows.register(Deploy)
        run = await rt.runs.wait((await rt.runs.start("deploy", input={"version": "1.2"})).id, timeout_s=10)
        print(f"run {run.id} {run.status}: {run.error}")
        for checkpoint in await rt.runs.checkpoints(run.id):
            print(f"  checkpoint {checkpoint['seq']}: next step {checkpoint['next_step']}")

        fork = await rt.runs.fork(run.id, state_patch={"target": "staging"})  # the latest checkpoint
        fork = await rt.runs.wait(fork.id, timeout_s=10)
        print(f"fork {fork.id} {fork.status}: result {fork.result}, forked_from {fork.summary()['forked_from']}")
        builds = [e for r in (run, fork) for e in await rt.runs.effects(None, r.id) if e.key == "build"]
        print(f"builds done: {len(builds)} (in {builds[0].run_id})")


if __name__ == "__main__":
    anyio.run(main)
