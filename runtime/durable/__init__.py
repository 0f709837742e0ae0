"""Durable execution: compiled plans, runs, events, checkpoints, leases, workers, effect ledger, interrupts.

Names are imported on first use (``runtime.lazy``): importing one module of the package (the records
of ``models.py``, which ``runtime.flow.workflow`` re-exports) does not load the engine.
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_exports

if TYPE_CHECKING:
    from runtime.durable.context import current_run_id
    from runtime.durable.engine import Engine
    from runtime.durable.models import Effect, Event, Interrupt, Run
    from runtime.durable.plan import Plan, StepPlan, compile_workflow
    from runtime.durable.registry import WorkflowRegistry
    from runtime.durable.service import RunService, RunWatch
    from runtime.durable.worker import Worker, run_worker

_EXPORTS = {
    "Effect": "runtime.durable.models",
    "Engine": "runtime.durable.engine",
    "Event": "runtime.durable.models",
    "Interrupt": "runtime.durable.models",
    "Plan": "runtime.durable.plan",
    "Run": "runtime.durable.models",
    "RunService": "runtime.durable.service",
    "RunWatch": "runtime.durable.service",
    "StepPlan": "runtime.durable.plan",
    "Worker": "runtime.durable.worker",
    "WorkflowRegistry": "runtime.durable.registry",
    "compile_workflow": "runtime.durable.plan",
    "current_run_id": "runtime.durable.context",
    "run_worker": "runtime.durable.worker",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "Effect",
    "Engine",
    "Event",
    "Interrupt",
    "Plan",
    "Run",
    "RunService",
    "RunWatch",
    "StepPlan",
    "Worker",
    "WorkflowRegistry",
    "compile_workflow",
    "current_run_id",
    "run_worker",
]
