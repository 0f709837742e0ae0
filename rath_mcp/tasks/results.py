"""What a finished task's tool call returns: the ``CallToolResult`` of ``run_start`` or ``delegate``.

Built from the same models the tools return (``RunSummary``, ``Delegation``), so a task's result
reads exactly like the tool's own answer for the run; a failed or timed-out run's result is an
error result (the 2025-11-25 spec ties a ``failed`` task to ``isError``).
"""

from __future__ import annotations

from typing import Any

import pydantic_core

from rath_mcp.tasks.view import TaskOrigin
from rath_mcp.tools.runs import Delegation, RunSummary
from runtime import Runtime
from runtime.durable.models import Run


async def structured_result(rt: Runtime, run: Run, origin: TaskOrigin) -> dict[str, Any]:
    """The tool's structured result for this run."""
    if origin.tool == "delegate":
        delegation = await Delegation.of(rt, run)
        return delegation.model_dump(mode="json")
    return RunSummary.of(run, rt).model_dump(mode="json")


async def call_tool_result(rt: Runtime, run: Run, origin: TaskOrigin) -> dict[str, Any]:
    """The ``CallToolResult`` wire dict the tool call of this task stands for."""
    structured = await structured_result(rt, run, origin)
    text = pydantic_core.to_json(structured, indent=2).decode()
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": run.status in ("failed", "timed_out"),
    }
