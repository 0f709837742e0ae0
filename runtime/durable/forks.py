"""Fork a run from one of its checkpoints: a new run that starts at that checkpoint's next step.

The new run's state is the checkpoint's state with ``state_patch`` applied as a JSON merge patch
(RFC 7386: objects merge key by key, recursively; a ``null`` value deletes its key; anything else
replaces). The steps before the checkpoint are not run again, so their effects are not repeated;
the step at the checkpoint's next step runs afresh in the new run (with a ledger of its own). Its
input session is a fork of the origin's session as it was at that checkpoint, so the session
lineage shows the branch. It works from a run in any status, a failed one included: patch what
made it fail and go on.

A fork keeps the origin's ``notify_url`` (it is the origin's work, carried on: whoever was told of the
origin is told of it too, its summary's ``forked_from`` naming the origin), else the workflow's own, as
any run started without one; checked against this server's webhook policy before anything is written.
It keeps the origin's ``priority`` too: carried-on work waits in the queue where the origin's did.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from runtime.durable.models import Run
from runtime.durable.store import NewRun, dumps
from runtime.errors import InvalidInputError
from runtime.jsonvalue import check_json

if TYPE_CHECKING:
    from runtime.durable.registry import WorkflowRegistry
    from runtime.durable.store import RunStore
    from runtime.sessions.service import SessionService


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with ``patch`` applied as a JSON merge patch (RFC 7386)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _chosen(run_id: str, checkpoints: list[dict[str, Any]], seq: int | None) -> dict[str, Any]:
    if not checkpoints:
        raise InvalidInputError(
            f"run {run_id} has no checkpoint to fork from yet (none of its steps has completed or asked a human)"
        )
    if seq is None:
        return checkpoints[-1]
    for checkpoint in checkpoints:
        if checkpoint["seq"] == seq:
            return checkpoint
    known = [c["seq"] for c in checkpoints]
    raise InvalidInputError(f"run {run_id} has no checkpoint {seq}; its checkpoints are {known} (run_checkpoints)")


async def fork_run(
    store: RunStore,
    workflows: WorkflowRegistry,
    sessions: SessionService,
    run_id: str,
    checkpoint_seq: int | None = None,
    state_patch: dict[str, Any] | None = None,
    *,
    trace_context: str | None = None,
    notify_target: Callable[[str, str | None], Awaitable[str | None]] | None = None,
) -> Run:
    """Queue a new run from a checkpoint of ``run_id`` (the latest by default); returns it. ``trace_context``:
    the span that asked for the fork (``runtime.durable.traced``), where the new run's spans go.
    ``notify_target``: checks the URL the fork notifies, ``(workflow, given) -> url`` (``Engine.notify_target``;
    None: the origin's URL is kept unchecked)."""
    if state_patch is not None and not isinstance(state_patch, dict):
        raise InvalidInputError(f"state_patch must be a JSON object (a merge patch), got {type(state_patch).__name__}")
    check_json(state_patch, "state_patch")
    origin = await store.get(run_id)
    checkpoint = _chosen(run_id, await store.checkpoints(run_id), checkpoint_seq)
    seq, next_step = int(checkpoint["seq"]), checkpoint["next_step"]
    if next_step is None:
        raise InvalidInputError(
            f"checkpoint {seq} of run {run_id} is where it finished: there is no step left to run from it; "
            "fork an earlier checkpoint (run_checkpoints lists them)"
        )
    plan = workflows.get(origin.workflow)
    if next_step not in plan.steps:
        raise InvalidInputError(
            f"checkpoint {seq} goes on at step {next_step!r}, which workflow {origin.workflow!r} no longer has "
            f"(steps: {sorted(plan.steps)})"
        )
    notify_url = origin.notify_url
    if notify_target is not None:  # a refused URL: nothing written
        notify_url = await notify_target(origin.workflow, notify_url)
    state = merge_patch(checkpoint["state"], state_patch or {})
    source = checkpoint.get("session_id") or origin.session_id
    session_id = (await sessions.fork(source))[0].id if source is not None else None
    origin_ref = {"run_id": run_id, "checkpoint_seq": seq}
    new = NewRun(
        workflow=origin.workflow,
        plan_hash=plan.plan_hash,
        step=next_step,
        input_json=dumps(origin.input),
        session_id=session_id,
        state_json=dumps(state),
        forked_from=(run_id, seq),
        concurrency_key=plan.run_key(origin.input),  # a fork counts against its workflow's limit too
        trace_context=trace_context,
        notify_url=notify_url,
        priority=origin.priority,  # the origin's place in the queue: a fork is the same work, carried on
    )
    created = {"workflow": origin.workflow, "plan_hash": plan.plan_hash, "session_id": session_id}
    forked = {**origin_ref, "next_step": next_step, "patched": sorted(state_patch or {}), "from_session": source}
    new_id = await store.create(new, [("run.created", {**created, "forked_from": origin_ref}), ("run.forked", forked)])
    return await store.get(new_id)
