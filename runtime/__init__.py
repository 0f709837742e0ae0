"""The rath-mcp runtime: sessions, durable workflows, agents, sandboxes and memory. Knows nothing of MCP."""

from runtime.durable import Effect, Event, Interrupt, Run, RunService, WorkflowRegistry, run_worker
from runtime.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    RathError,
    RunFailure,
    UsageError,
)
from runtime.flow.workflow import (
    Decision,
    EffectClass,
    RetryPolicy,
    StepContext,
    SyncStepContext,
    Workflow,
    router,
    step,
)
from runtime.memory import CommitResult, Extractor, HeuristicExtractor, MemoryHit, MemoryItem, MemoryService
from runtime.runtime import Runtime, resolve_home
from runtime.sandbox import Capabilities, CommandResult, FileEntry, Sandbox, SandboxError
from runtime.sandbox.registry import SandboxRegistry
from runtime.sessions import Chunk, LineageGraph, Placement, Session, SessionInfo, ToolCall, Usage

__all__ = [
    "Capabilities",
    "Chunk",
    "CommandResult",
    "CommitResult",
    "ConflictError",
    "Decision",
    "Effect",
    "EffectClass",
    "Event",
    "Extractor",
    "FileEntry",
    "HeuristicExtractor",
    "Interrupt",
    "InvalidInputError",
    "LineageGraph",
    "MemoryHit",
    "MemoryItem",
    "MemoryService",
    "NotFoundError",
    "Placement",
    "RathError",
    "RetryPolicy",
    "Run",
    "RunFailure",
    "RunService",
    "Runtime",
    "Sandbox",
    "SandboxError",
    "SandboxRegistry",
    "Session",
    "SessionInfo",
    "StepContext",
    "SyncStepContext",
    "ToolCall",
    "Usage",
    "UsageError",
    "Workflow",
    "WorkflowRegistry",
    "resolve_home",
    "router",
    "run_worker",
    "step",
]
