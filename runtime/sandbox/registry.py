"""``SandboxRegistry``: from a session's placement to an opened sandbox, and forks of workspaces.

A session's ``placement`` is ``{backend, workspace}``. The registry owns one instance of each
backend, opens each (backend, workspace) once and hands the same ``Sandbox`` to every caller until
``aclose``. ``isolate`` gives a forked session its own copy of the workspace.

The registry's ``SandboxPolicy`` (isolation, limits, network allow-list) comes from ``config.json``
and the CLI flags; ``get(..., workflow=name)`` applies that workflow's own entry, if any.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio

from runtime.sandbox.base import Backend, Sandbox, SandboxError, check_workspace_name
from runtime.sandbox.local import LocalBackend, LocalSandbox
from runtime.sandbox.opensandbox_settings import OpenSandboxSettings
from runtime.sandbox.policy import SandboxPolicy, load_policy
from runtime.sandbox.traced import traced
from runtime.sessions import Placement
from runtime.telemetry import Tracing

DEFAULT_WORKSPACE = "default"
BUILTIN_BACKENDS = ("local", "opensandbox")


def check_backend_name(name: str) -> str:
    """Validate a default backend name up front (before anything is opened)."""
    if name not in BUILTIN_BACKENDS:
        raise SandboxError(f"unknown sandbox backend {name!r}; choose one of {', '.join(BUILTIN_BACKENDS)}")
    return name


class SandboxRegistry:
    """The backends of one runtime and the sandboxes it has opened."""

    def __init__(
        self,
        home: Path,
        default_backend: str = "local",
        opensandbox_settings: OpenSandboxSettings | dict[str, Any] | None = None,
        *,
        use_bwrap: bool | None = None,
        policy: SandboxPolicy | None = None,
        workspaces: Path | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        """``workspaces``: the directory of the local backend's workspaces (default ``home/workspaces``).
        ``tracing``: where each sandbox handed out reports its commands as spans (default: nowhere)."""
        self.tracing = tracing or Tracing()
        if isinstance(opensandbox_settings, dict):
            opensandbox_settings = OpenSandboxSettings(**opensandbox_settings)
        self.home = Path(home)
        self.policy = policy if policy is not None else load_policy(self.home)
        self._opensandbox_settings = opensandbox_settings
        # The opensandbox backend (and its slow-to-import SDK) is made when first named: see _check_backend.
        self.backends: dict[str, Backend] = {
            "local": LocalBackend(workspaces or self.home / "workspaces", use_bwrap=use_bwrap, policy=self.policy),
        }
        self.default_backend = self._check_backend(default_backend)
        self._open: dict[tuple[str, str], Sandbox] = {}
        self._locks: dict[tuple[str, str], anyio.Lock] = {}

    def register(self, backend: Backend) -> None:
        """Add (or replace) a backend, e.g. a test fake implementing the ``Backend`` protocol."""
        self.backends[backend.name] = backend

    def _check_backend(self, name: str) -> str:
        if name == "opensandbox" and name not in self.backends:
            from runtime.sandbox.opensandbox import OpenSandboxBackend

            self.backends[name] = OpenSandboxBackend(settings=self._opensandbox_settings, policy=self.policy)
        if name not in self.backends:
            known = ", ".join(sorted(set(self.backends) | set(BUILTIN_BACKENDS)))
            raise SandboxError(f"unknown sandbox backend {name!r}; choose one of {known}")
        return name

    def placement(self, workspace: str | None = None, backend: str | None = None) -> Placement:
        """A placement on this registry's default backend (validated)."""
        name = self._check_backend(backend or self.default_backend)
        return Placement(backend=name, workspace=check_workspace_name(workspace) if workspace else None)

    def _key(self, placement: Placement) -> tuple[str, str]:
        backend = self._check_backend(placement.backend or self.default_backend)
        return backend, check_workspace_name(placement.workspace or DEFAULT_WORKSPACE)

    @property
    def isolation(self) -> str:
        """What local commands run in: ``bubblewrap``, ``none`` or ``unavailable`` (refused)."""
        local = self.backends.get("local")
        return local.mode if isinstance(local, LocalBackend) else "unknown"

    async def get(self, placement: Placement, *, workflow: str | None = None) -> Sandbox:
        """The opened sandbox for ``placement`` (opened on first use, then cached); under
        ``workflow``'s own policy when config.json gives it one (local backend)."""
        sandbox = await self._get(placement)
        policy = self.policy.for_workflow(workflow)
        if isinstance(sandbox, LocalSandbox) and policy != sandbox.policy:
            return traced(sandbox.with_policy(policy), self.tracing)
        return traced(sandbox, self.tracing)

    async def _get(self, placement: Placement) -> Sandbox:
        key = self._key(placement)
        # One lock per workspace: a slow container start does not hold up other workspaces.
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            sandbox = self._open.get(key)
            if sandbox is None:
                sandbox = await self.backends[key[0]].open(key[1])
                self._open[key] = sandbox
            return sandbox

    async def isolate(self, placement: Placement, new_workspace: str | None = None) -> Placement:
        """Clone the placement's workspace for a forked session; returns the child's placement."""
        backend, source = self._key(placement)
        target = check_workspace_name(new_workspace or f"{source[:80]}-fork-{os.urandom(5).hex()}")
        await self.get(Placement(backend=backend, workspace=source))  # a never-used workspace is cloned empty
        await self.backends[backend].clone(source, target)
        return Placement(backend=backend, workspace=target)

    async def destroy(self, placement: Placement) -> None:
        """Remove a workspace and forget its opened sandbox."""
        key = self._key(placement)
        async with self._locks.setdefault(key, anyio.Lock()):
            sandbox = self._open.pop(key, None)
        if sandbox is not None:
            await sandbox.close()
        await self.backends[key[0]].destroy(key[1])

    async def aclose(self) -> None:
        """Close every opened sandbox and backend connection (workspaces stay; they are data)."""
        opened, self._open = list(self._open.values()), {}
        with anyio.CancelScope(shield=True):
            for sandbox in opened:
                await sandbox.close()
            for backend in self.backends.values():
                closer = getattr(backend, "aclose", None)  # optional: backends holding connections
                if closer is not None:
                    await closer()
