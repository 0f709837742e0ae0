"""``ctx.save_artifact`` inside a step: the artifact names its run and session, and a step run again
(here: resumed after an interrupt) gets the artifacts it saved before, not new ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import Runtime
from runtime.flow.workflow import EffectClass, StepContext, Workflow, step

pytestmark = pytest.mark.anyio


class SavesArtifacts(Workflow):
    """Save a report, a table from a file, then ask before finishing."""

    @step(entry=True, effects=EffectClass.IDEMPOTENT)
    async def write(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        text = await ctx.save_artifact("# Report\n", name="report.md")
        table = Path(ctx.input["table"])
        from_file = await ctx.save_artifact(table)
        await ctx.interrupt("approval", prompt="done?")
        return {"saved": [text["artifact_id"], from_file["artifact_id"]]}


async def test_a_step_saves_artifacts_once_however_often_it_runs(rt: Runtime, tmp_path: Path) -> None:
    name = rt.workflows.register(SavesArtifacts).name
    table = tmp_path / "table.csv"
    table.write_text("a,b\n1,2\n")
    session = await rt.sessions.create([{"kind": "user", "content": "report please"}])
    run = await rt.runs.start(name, session_id=session.id, input={"table": str(table)})
    waiting = await rt.runs.wait(run.id, 20)
    assert waiting.status == "waiting", waiting.error
    before, _ = await rt.artifacts.list(run_id=run.id)
    assert [(a.name, a.mime_type, a.session_id) for a in before] == [
        ("report.md", "text/markdown", session.id),
        ("table.csv", "text/csv", session.id),
    ]
    await rt.runs.resolve_interrupt(waiting.pending_interrupts[0].id, "approve")
    done = await rt.runs.wait(run.id, 20)
    assert done.status == "succeeded", done.error
    after, _ = await rt.artifacts.list(run_id=run.id)
    assert after == before and done.result == {"saved": [a.id for a in before]}
    assert (await rt.artifacts.read(before[1].id))[1] == b"a,b\n1,2\n"
