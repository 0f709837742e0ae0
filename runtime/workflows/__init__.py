"""Workflows shipped with the runtime, registered in every ``Runtime``.

``echo`` and ``approval`` come with the durable layer; ``agent`` and ``team`` live in
``runtime/workflows/agent.py`` and ``team.py`` (the agent layer) and are picked up when present.
Each of those modules lists its workflows in ``WORKFLOWS``.
"""

from __future__ import annotations

import importlib

from runtime.flow.workflow import Workflow
from runtime.workflows.approval import Approval
from runtime.workflows.echo import Echo

OPTIONAL_MODULES = ("runtime.workflows.agent", "runtime.workflows.team")


def _defined_in(module_name: str) -> list[type[Workflow]]:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return []
        raise
    return list(module.WORKFLOWS)


def builtin_workflows() -> list[type[Workflow]]:
    """The shipped workflow classes: echo, approval, then agent and team when their modules exist."""
    found: list[type[Workflow]] = [Echo, Approval]
    for module_name in OPTIONAL_MODULES:
        found += _defined_in(module_name)
    return found


__all__ = ["Approval", "Echo", "builtin_workflows"]
