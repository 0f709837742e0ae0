"""``Services``: what code running inside a workflow sees of its runtime (``StepContext.runtime``).

A protocol, not the ``Runtime`` class: the engine and the composition layer are handed the object and
never import the module that builds it, so no import points back up from ``runtime/flow`` or
``runtime/durable`` to ``runtime/runtime.py``. ``Runtime`` satisfies it; the services are those of the
scope the calling task works in (a run's own, while its steps run).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from runtime.artifacts.service import ArtifactService
    from runtime.memory.service import MemoryService
    from runtime.policy import CallPolicy
    from runtime.providers.registry import ProviderRegistry
    from runtime.sandbox.registry import SandboxRegistry
    from runtime.secrets import Secrets
    from runtime.sessions.service import SessionService


class WorkflowCatalog(Protocol):
    """The workflows a runtime knows, as a selector describes them to a model."""

    def describe(self) -> list[dict[str, Any]]: ...


class Services(Protocol):
    """Sessions, memory, sandboxes and providers of the current scope, the known workflows, the home
    directory, the secrets and the call policy of config.json."""

    @property
    def home(self) -> Path: ...
    @property
    def sessions(self) -> SessionService: ...
    @property
    def memory(self) -> MemoryService: ...
    @property
    def sandboxes(self) -> SandboxRegistry: ...
    @property
    def providers(self) -> ProviderRegistry: ...
    @property
    def workflows(self) -> WorkflowCatalog: ...
    @property
    def artifacts(self) -> ArtifactService: ...
    @property
    def secrets(self) -> Secrets: ...
    @property
    def policy(self) -> CallPolicy: ...
