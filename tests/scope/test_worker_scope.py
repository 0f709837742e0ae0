"""A worker serves every scope of its store, and drives each run inside the run's own scope.

The runtime here is opened in the default scope with its worker; a run started in scope B is
claimed by that worker and everything its step does (sessions, memory, an effect, files in its
sandbox workspace) lands in B, and nowhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import NotFoundError, Runtime, StepContext, Workflow, step
from runtime.durable.owner import this_process
from runtime.durable.store import Holder
from runtime.runtime import workspaces_dir

pytestmark = pytest.mark.anyio


class ScopeProbe(Workflow):
    """Writes one of everything through the runtime the worker hands its step."""

    name = "scope_probe"

    @step(entry=True)
    async def write(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        rt = ctx.runtime
        session = await rt.sessions.create([{"kind": "user", "content": "written by the run"}])
        item = await rt.memory.remember("what the run learnt", path="probe/fact")
        sandbox = await rt.sandboxes.get(rt.sandboxes.placement("probe"))
        await sandbox.write_file("mark.txt", "from the run")
        effect = await ctx.effect("probe.effect", lambda: _answer(), "idempotent")
        return {"scope": [rt.tenant, rt.project], "session": session.id, "memory": item.id, "effect": effect}


async def _answer() -> str:
    return "done"


async def test_a_run_started_in_scope_b_executes_with_its_sessions_memory_effects_and_workspace_in_b(
    home: Path,
) -> None:
    async with Runtime.open(home) as rt:  # its worker was started in the default scope
        rt.workflows.register(ScopeProbe)
        with rt.scope("bravo", "beta") as b:
            started = await rt.runs.start("scope_probe")
            run = await rt.runs.wait(started.id, 20)
        assert run.status == "succeeded", run.error
        assert run.state["scope"] == ["bravo", "beta"] and run.state["effect"] == "done"
        assert (await b.sessions.info(run.state["session"])).id == run.state["session"]
        assert (await b.memory.get(run.state["memory"])).content == "what the run learnt"
        (effect,) = await b.runs.effects(status=None, run_id=run.id)
        assert effect.status == "succeeded"
        assert (workspaces_dir(home, "bravo", "beta") / "probe" / "mark.txt").read_text() == "from the run"
        default = rt.scoped("local", "default")
        with pytest.raises(NotFoundError):
            await default.sessions.info(run.state["session"])
        with pytest.raises(NotFoundError):
            await default.memory.get(run.state["memory"])
        with pytest.raises(NotFoundError):
            await default.runs.get(run.id)
        assert await default.runs.effects(status=None) == []
        assert not (home / "workspaces" / "probe").exists()
        assert rt.tenant == "local" and rt.project == "default"  # the block ended: back in the runtime's scope


async def test_scopes_are_checked_and_each_scope_keeps_its_own_services(home: Path) -> None:
    async with Runtime.open(home, workers=0) as rt:
        with pytest.raises(Exception, match="tenant"):
            rt.scoped("bad tenant!", "p")
        first = rt.scoped("t", "p")
        assert rt.scoped("t", "p") is first and rt.scoped("t", "q") is not first
        with rt.scope("t", "p") as services:
            assert services is first and rt.sessions is first.sessions and rt.runs is first.runs
        assert rt.sessions is rt.scoped("local", "default").sessions
        # OpenSandbox containers are found by label: each scope's carry a namespace of their own
        first.sandboxes.placement(backend="opensandbox")  # makes the backend; nothing is connected yet
        opensandbox: Any = first.sandboxes.backends["opensandbox"]
        assert opensandbox.settings.namespace == "rath.t.p"


async def test_a_worker_takes_over_at_once_the_run_of_scope_b_an_ended_process_of_this_host_held(home: Path) -> None:
    me = this_process()
    assert me is not None, "this test needs /proc (Linux)"
    # This pid with another start time: a process that had it before us and has ended.
    ended = Holder(me.host, me.pid, me.started + 1)
    async with Runtime.open(home, workers=0) as starter:
        starter.workflows.register(ScopeProbe)
        with starter.scope("bravo", "beta"):
            run_id = (await starter.runs.start("scope_probe")).id
        (held,) = await starter.store.queue().claim("ended", 3600.0, 1, ["scope_probe"], holder=ended)
        assert (held.id, held.tenant, held.project) == (run_id, "bravo", "beta")
    async with Runtime.open(home, lease_s=3600.0) as rt:  # its worker, in the default scope; leases of an hour
        rt.workflows.register(ScopeProbe)
        with rt.scope("bravo", "beta") as b:
            run = await rt.runs.wait(run_id, 20)
        assert run.status == "succeeded", run.error
        assert run.state["scope"] == ["bravo", "beta"]
        types = [e.type for e in await b.runs.events(run_id)]
        assert "lease.taken_over" in types and "lease.expired" not in types
