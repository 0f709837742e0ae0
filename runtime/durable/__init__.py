"""Durable execution: compiled plans, runs, events, checkpoints, leases, workers, effect ledger, interrupts."""

from runtime.durable.context import current_run_id
from runtime.durable.models import Effect, Event, Interrupt, Run
from runtime.durable.plan import Plan, StepPlan, compile_workflow
from runtime.durable.registry import WorkflowRegistry
from runtime.durable.service import RunService, RunWatch
from runtime.durable.worker import Worker, run_worker

__all__ = [
    "Effect",
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
