"""Fork a run from a checkpoint: ``run_checkpoints`` lists where a run can be forked, ``run_fork`` forks it.

Thin: the runtime's ``rt.runs.checkpoints`` and ``rt.runs.fork`` do the work (see
``runtime.durable.forks`` for what a fork starts from and how ``state_patch`` merges).
"""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import InputRequiredResult
from pydantic import Field

from rath_mcp.errors import translate_tool
from rath_mcp.models import MAX_INDEX, WireModel
from rath_mcp.tools.arguments import INSIDE, JsonObject, RunId, WaitS
from rath_mcp.tools.runs import RunSummary, summary_of
from rath_mcp.tools.sessions import READ_ONLY, WRITES
from rath_mcp.waiting import RunWaiter, cap
from runtime import Runtime


class Checkpoint(WireModel):
    seq: int = Field(description="pass as checkpoint_seq to run_fork")
    next_step: str | None = Field(description="the step a fork from here starts at; null where the run finished")
    created_at: float


class CheckpointList(WireModel):
    run_id: str
    checkpoints: list[Checkpoint] = Field(description="oldest first")


def register(server: MCPServer, rt: Runtime, waiter: RunWaiter) -> None:
    """Add ``run_checkpoints`` and ``run_fork`` to ``server``."""

    @server.tool(annotations=READ_ONLY)
    @translate_tool
    async def run_checkpoints(run_id: RunId) -> CheckpointList:
        """The checkpoints of a run, oldest first: where run_fork can start a new run from."""
        found = await rt.runs.checkpoints(run_id)
        points = [Checkpoint(seq=c["seq"], next_step=c["next_step"], created_at=c["created_at"]) for c in found]
        return CheckpointList(run_id=run_id, checkpoints=points)

    @server.tool(annotations=WRITES)
    @translate_tool
    async def run_fork(
        run_id: RunId,
        ctx: Context,
        checkpoint_seq: Annotated[
            int | None, Field(ge=0, le=MAX_INDEX, description="a checkpoint's seq (default: the latest)")
        ] = None,
        state_patch: Annotated[
            JsonObject,
            Field(description="a JSON merge patch (RFC 7386) on the checkpoint's state: null deletes a key" + INSIDE),
        ] = None,
        wait_s: WaitS = 0,
    ) -> RunSummary | InputRequiredResult:
        """Start a new run from a checkpoint of a run (any status, a failed one too): it goes on at that
        checkpoint's next step with the checkpoint's state merged with state_patch; earlier steps are not
        run again. Its input session is a fork of the run's session at that checkpoint."""
        forked_id = waiter.resumed_run_id(ctx)
        if forked_id is None:
            forked_id = (await rt.runs.fork(run_id, checkpoint_seq, state_patch)).id
        return summary_of(await waiter.wait(ctx, forked_id, cap(wait_s)), rt)
