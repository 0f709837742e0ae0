"""``Runtime``: the one object through which the engine is used.

An async context manager that owns the store, the background task group (workers) and the
registries of the layers. No module-level state: open as many runtimes side by side as you like.

    async with Runtime.open("~/.rath") as rt:
        s = await rt.sessions.create([{"kind": "user", "content": "hi"}])
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from runtime.backend import StoreBackend
from runtime.durable.registry import WorkflowRegistry
from runtime.durable.service import POLL_S, RunService
from runtime.durable.worker import run_worker
from runtime.errors import InvalidInputError, StoreError
from runtime.memory.service import MemoryService
from runtime.providers.registry import ProviderRegistry
from runtime.sandbox.local import resolve_isolation
from runtime.sandbox.opensandbox_settings import OpenSandboxSettings
from runtime.sandbox.policy import SandboxPolicy, load_policy
from runtime.sandbox.registry import SandboxRegistry, check_backend_name
from runtime.sessions.service import SessionService
from runtime.store import DB_FILE, StoreURL, open_backend, resolve_store
from runtime.workflows import builtin_workflows

DEFAULT_HOME = "~/.rath"


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """``home`` if given, else ``$RATH_HOME``, else ``~/.rath``.

    Not the working directory: desktop hosts start servers in a directory of their own choosing, and
    a server must find the same state wherever it was started.
    """
    chosen = home if home is not None else os.environ.get("RATH_HOME") or DEFAULT_HOME
    return Path(chosen).expanduser().resolve()


def resolve_poll_s(poll_s: float | None = None) -> float:
    """``poll_s`` if given, else ``$RATH_POLL_S``, else ``POLL_S``: seconds between fallback polls."""
    text = os.environ.get("RATH_POLL_S") if poll_s is None else None
    try:
        value = float(text) if text else (POLL_S if poll_s is None else float(poll_s))
    except ValueError:
        raise InvalidInputError(f"RATH_POLL_S must be a number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise InvalidInputError(f"the poll interval must be a positive number of seconds (got {value!r})")
    return value


def store_path(home: Path) -> Path:
    """The SQLite file of the default store under ``home`` (``--store`` may name another)."""
    return home / DB_FILE


def _check_scope(name: str, value: str) -> str:
    if not value or not value.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise InvalidInputError(f"{name} {value!r} must be non-empty letters, digits, '-', '_' or '.'")
    return value


class Runtime:
    """The embedded runtime of one home, scoped to one tenant and project."""

    def __init__(
        self,
        home: Path,
        store: StoreBackend,
        tenant: str,
        project: str,
        task_group: TaskGroup,
        *,
        sandbox: str = "local",
        opensandbox: OpenSandboxSettings | dict[str, Any] | None = None,
        sandbox_policy: SandboxPolicy | None = None,
    ) -> None:
        self.home = home
        self.store = store
        self.tenant = tenant
        self.project = project
        self.task_group = task_group
        self.sessions = SessionService(store.sessions(tenant, project))
        self.memory = MemoryService(store.memory(tenant, project), self.sessions)
        self.workflows = WorkflowRegistry()
        for workflow in builtin_workflows():
            self.workflows.register(workflow)
        self.runs = RunService(self, store.runs(tenant, project))
        self.providers = ProviderRegistry(home)
        self.sandboxes = SandboxRegistry(
            home, default_backend=sandbox, opensandbox_settings=opensandbox, policy=sandbox_policy
        )

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        home: str | os.PathLike[str] | None = None,
        *,
        store: str | StoreURL | None = None,
        tenant: str = "local",
        project: str = "default",
        synchronous: str = "FULL",
        workers: int = 4,
        lease_s: float = 30.0,
        poll_s: float | None = None,
        sandbox: str = "local",
        opensandbox: OpenSandboxSettings | dict[str, Any] | None = None,
        create: bool = True,
        sandbox_policy: SandboxPolicy | None = None,
    ) -> AsyncIterator[Runtime]:
        """Open (creating and migrating if needed) the runtime stored under ``home``.

        ``store``: a store URL (``sqlite:///ABSOLUTE/PATH.db``, ``postgresql://…``); default ``rath.db``
        under the home (which holds sandbox workspaces and config either way).
        ``create=False``: the store must exist already (inspecting never leaves an empty one behind).
        ``workers``: durable runs this process drives at once (0: no worker loop here).
        ``lease_s``: how long a worker's claim on a run lasts without renewal.
        ``poll_s``: how often waits and workers look at the store for what no notification told them
        (default ``$RATH_POLL_S``, else 0.25 s); on PostgreSQL, notifications come first.
        ``sandbox``: the default sandbox backend of new placements (``local`` or ``opensandbox``);
        ``opensandbox``: how to reach an OpenSandbox server (``OpenSandboxSettings`` or its fields).
        ``sandbox_policy``: isolation, limits and allow-list of tool commands (default: config.json's).
        """
        _check_scope("tenant", tenant)  # checked before the database is opened: a plain error
        _check_scope("project", project)
        check_backend_name(sandbox)
        if not isinstance(workers, int) or workers < 0:
            raise InvalidInputError(f"workers must be a whole number of runs, 0 or more (got {workers!r})")
        if not lease_s > 0 or lease_s == float("inf"):
            raise InvalidInputError(f"lease_s must be a positive number of seconds (got {lease_s!r})")
        poll_s = resolve_poll_s(poll_s)
        root = resolve_home(home)
        url = resolve_store(store, root)  # checked before anything is opened: a plain error
        if not create and url.path is not None and not url.path.is_file():
            raise StoreError(f"there is no store at {url.path}")
        if sandbox_policy is None:  # a bad sandbox section in config.json is a plain error, before the store opens
            sandbox_policy = load_policy(root)
        resolve_isolation(sandbox_policy.isolation)  # so is --isolation bwrap without bubblewrap
        backend: StoreBackend = await open_backend(url, synchronous=synchronous)
        body_error: BaseException | None = None
        try:
            async with anyio.create_task_group() as tg:
                rt = cls(
                    root,
                    backend,
                    tenant,
                    project,
                    tg,
                    sandbox=sandbox,
                    opensandbox=opensandbox,
                    sandbox_policy=sandbox_policy,
                )
                rt.runs.lease_s, rt.runs.poll_s = lease_s, poll_s
                tg.start_soon(rt.runs.follow_others)
                if workers:
                    tg.start_soon(partial(run_worker, rt, slots=workers))
                try:
                    yield rt
                except BaseException as exc:  # re-raised below, unwrapped by the task group
                    body_error = exc
                finally:
                    tg.cancel_scope.cancel()
                    with anyio.CancelScope(shield=True):  # close the model SDK clients even when cancelled
                        await rt.providers.aclose()
                    with anyio.CancelScope(shield=True):
                        await rt.sandboxes.aclose()
        finally:
            await backend.close()
        if body_error is not None:
            raise body_error
