"""``Runtime``: the one object through which the engine is used.

An async context manager that owns the store, the background task group (workers) and the
registries of the layers. No module-level state: open as many runtimes side by side as you like.

    async with Runtime.open("~/.rath") as rt:
        s = await rt.sessions.create([{"kind": "user", "content": "hi"}])

One runtime serves every tenant/project of its store. Which one a call works in is a context
variable of the runtime (see ``Runtime.scope``): ``rt.sessions``, ``rt.runs``, ``rt.memory`` and
``rt.sandboxes`` are the services of the scope current in the calling task, so code that reaches
them (tools, workflows, agents) needs no scope argument and cannot step outside it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from runtime.artifacts.blobs import BlobStore, open_blob_store, resolve_artifacts_url
from runtime.artifacts.collector import ArtifactCollector
from runtime.artifacts.service import ArtifactService, limits_from_env
from runtime.backend import StoreBackend
from runtime.durable.engine import POLL_S, Engine
from runtime.durable.registry import WorkflowRegistry
from runtime.durable.service import RunService
from runtime.durable.store import RunStore
from runtime.durable.store_shared import Scope
from runtime.durable.worker import run_worker
from runtime.errors import InvalidInputError, StoreError
from runtime.memory.embed import make_embedder
from runtime.memory.semantic import Semantic
from runtime.memory.service import MemoryService
from runtime.policy import CallPolicy, Policy, load_call_policy
from runtime.providers.registry import ProviderRegistry
from runtime.sandbox.local import resolve_isolation
from runtime.sandbox.opensandbox_settings import OpenSandboxSettings
from runtime.sandbox.policy import SandboxPolicy, load_policy
from runtime.sandbox.registry import SandboxRegistry, check_backend_name
from runtime.sandbox.workspaces import make_home
from runtime.schedules import ScheduleService, Ticker
from runtime.secrets import Secrets, load_secrets
from runtime.sessions.service import SessionService
from runtime.store import StoreURL, open_backend, resolve_store
from runtime.telemetry import Tracing
from runtime.webhooks.service import WebhookService
from runtime.webhooks.signing import secret_from_env
from runtime.webhooks.targets import WebhookPolicy, hosts_from_config, parse_hosts
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


def check_scope_name(name: str, value: str) -> str:
    """``value`` as a tenant or project name (``name`` says which), or ``InvalidInputError`` saying why not."""
    if not value or not value.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise InvalidInputError(f"{name} {value!r} must be non-empty letters, digits, '-', '_' or '.'")
    return value


@dataclass(frozen=True)
class ScopeServices:
    """The services of one tenant/project: its sessions, runs, memory and sandbox workspaces."""

    tenant: str
    project: str
    sessions: SessionService
    runs: RunService
    memory: MemoryService
    sandboxes: SandboxRegistry
    artifacts: ArtifactService


def workspaces_dir(home: Path, tenant: str, project: str) -> Path:
    """Where the local sandbox workspaces of a scope live under ``home``.

    The embedded default scope keeps ``home/workspaces`` (where they always were); any other scope
    gets ``home/scopes/TENANT/PROJECT/workspaces``, so a workspace name chosen in one scope can never
    reach another scope's files.
    """
    if (tenant, project) == ("local", "default"):
        return home / "workspaces"
    return home / "scopes" / tenant / project / "workspaces"


class Runtime:
    """The embedded runtime of one home, serving every tenant/project of its store.

    The scope a call works in is a context variable of this runtime: ``rt.scope(tenant, project)``
    sets it for a ``with`` block (the MCP layer enters the caller's scope for each request; the
    worker enters each run's scope while it drives the run), and tasks started inside the block
    inherit it. Outside any block it is the scope the runtime was opened with. ``rt.sessions``,
    ``rt.runs``, ``rt.memory`` and ``rt.sandboxes`` read it and return that scope's services, made
    once per scope and cached. Workflows, providers and the store are shared by every scope.
    """

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
        lease_s: float = 30.0,
        poll_s: float = POLL_S,
        worker_slots: int = 0,
        max_queued_runs: int | None = 1000,
        webhook_policy: WebhookPolicy | None = None,
        webhook_key: bytes | tuple[bytes, ...] | None = None,
        semantic: Semantic | None = None,
        blobs: BlobStore | None = None,
        secrets: Secrets | None = None,
        policy: Policy | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.home = home
        self.store = store
        self.tracing = tracing or Tracing()  # model calls and sandbox commands as spans (runtime.telemetry)
        # config.json's secrets, resolved when used; its redactor keeps their values out of what is written
        self.secrets = secrets if secrets is not None else load_secrets(home)
        # config.json's rules over tool calls and effects; decisions go to the audit trail of the store
        rules = policy if policy is not None else load_call_policy(home)
        self.policy = CallPolicy(rules, store.audit(), lambda: self._current.get())
        self.blobs = blobs or open_blob_store(resolve_artifacts_url(None, home))  # where artifacts' bytes live
        self.task_group = task_group
        self.workflows = WorkflowRegistry()
        for workflow in builtin_workflows():
            self.workflows.register(workflow)
        self.providers = ProviderRegistry(home, tracing=self.tracing)
        self._opened = (tenant, project)
        # Everything the durable engine needs, handed down once: it never reaches back up here.
        self.engine = Engine(
            runs=store.runs(tenant, project),
            stores=lambda tenant, project: self.scoped(tenant, project).runs.store,
            queue=store.queue(),
            workflows=self.workflows,
            services=self,
            scope=self.scope,
            lease_s=lease_s,
            poll_s=poll_s,
            worker_slots=worker_slots,
            max_queued=max_queued_runs,
            tracing=self.tracing,
        )
        # Fires due schedules of every scope, on a clock of its own (tests set ``ticker.clock``).
        self.ticker = Ticker(store.schedules(), self.workflows, self.engine.wake_workers)
        # Run notifications: what a run start checks its notify_url with, and the sender of the outbox.
        self.webhooks = WebhookService(store.webhooks(), webhook_policy or WebhookPolicy(), webhook_key)
        self.engine.check_notify = self.webhooks.check
        self._sandbox_options: dict[str, Any] = {
            "default_backend": sandbox,
            "opensandbox_settings": opensandbox,
            "policy": sandbox_policy,
            "tracing": self.tracing,
        }
        self._scopes: dict[tuple[str, str], ScopeServices] = {}
        self.semantic = semantic  # the embedder and vector indexes (None: keyword recall only)
        # One variable per runtime: two runtimes in one process never see each other's scope.
        self._current: ContextVar[tuple[str, str]] = ContextVar(f"rath_scope_{id(self):x}", default=(tenant, project))
        self.scoped(tenant, project)

    def scoped(self, tenant: str | None = None, project: str | None = None) -> ScopeServices:
        """The services of ``tenant``/``project`` (default: the current scope), made on first use."""
        key = self._current.get() if tenant is None or project is None else (tenant, project)
        found = self._scopes.get(key)
        if found is None:
            found = self._scopes[key] = self._make_scope(*key)
        return found

    def _make_scope(self, tenant: str, project: str) -> ScopeServices:
        check_scope_name("tenant", tenant)
        check_scope_name("project", project)
        sessions = SessionService(self.store.sessions(tenant, project), redactor=self.secrets.redactor)
        options = dict(self._sandbox_options)
        if (tenant, project) != ("local", "default"):  # OpenSandbox finds containers by label: one namespace per scope
            given = options["opensandbox_settings"]
            base = OpenSandboxSettings(**given) if isinstance(given, dict) else given or OpenSandboxSettings()
            options["opensandbox_settings"] = replace(base, namespace=f"{base.namespace}.{tenant}.{project}")
        sandboxes = SandboxRegistry(self.home, workspaces=workspaces_dir(self.home, tenant, project), **options)
        return ScopeServices(
            tenant=tenant,
            project=project,
            sessions=sessions,
            runs=RunService(self.engine, self._run_store(tenant, project), sessions),
            memory=MemoryService(
                self.store.memory(tenant, project), sessions, self.semantic, (tenant, project), tracing=self.tracing
            ),
            sandboxes=sandboxes,
            artifacts=ArtifactService(
                self.store.artifacts(tenant, project), self.blobs, tenant, project, sessions, sandboxes
            ),
        )

    def artifact_collector(self, interval_s: float) -> ArtifactCollector:
        """The GC pass over this runtime's artifact store, every ``interval_s``, in every tenant/project."""
        return ArtifactCollector(self.blobs, lambda tenant, project: self.scoped(tenant, project).artifacts, interval_s)

    def _run_store(self, tenant: str, project: str) -> RunStore:
        """The scope's ``RunStore`` (the opening scope's is the engine's own)."""
        return self.engine.runs if (tenant, project) == self._opened else self.store.runs(tenant, project)

    @property
    def lease_s(self) -> float:
        return self.engine.lease_s

    @property
    def poll_s(self) -> float:
        return self.engine.poll_s

    @property
    def worker_slots(self) -> int:
        """Runs this process drives at once; 0: none (worker processes on the same store do)."""
        return self.engine.worker_slots

    @contextmanager
    def scope(self, tenant: str, project: str) -> Iterator[ScopeServices]:
        """Work in ``tenant``/``project`` for the ``with`` block (and the tasks started in it)."""
        services = self.scoped(tenant, project)
        token = self._current.set((tenant, project))
        try:
            yield services
        finally:
            self._current.reset(token)

    @property
    def tenant(self) -> str:
        return self._current.get()[0]

    @property
    def project(self) -> str:
        return self._current.get()[1]

    @property
    def sessions(self) -> SessionService:
        return self.scoped().sessions

    @property
    def runs(self) -> RunService:
        return self.scoped().runs

    @property
    def memory(self) -> MemoryService:
        return self.scoped().memory

    @property
    def sandboxes(self) -> SandboxRegistry:
        return self.scoped().sandboxes

    @property
    def schedules(self) -> ScheduleService:
        """The current scope's schedules."""
        here = self.scoped()
        return ScheduleService(self.ticker.store, Scope(here.tenant, here.project), here.runs, self.ticker)

    @property
    def artifacts(self) -> ArtifactService:
        return self.scoped().artifacts

    async def _close_scopes(self) -> None:
        with anyio.CancelScope(shield=True):
            for services in list(self._scopes.values()):
                await services.sandboxes.aclose()

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
        artifacts: str | None = None,
        artifact_gc_s: float | None = None,
        embedder: str | None = "none",
        max_queued_runs: int | None = 1000,
        tracing: Tracing | None = None,
        allow_webhook_hosts: str | Sequence[str] | None = None,
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
        ``artifacts``: where artifacts' bytes go (``file:///DIR`` or ``s3://BUCKET/PREFIX``; default
        ``$RATH_ARTIFACTS``, else ``HOME/artifacts``).
        ``artifact_gc_s``: seconds between GC passes over the artifact store (``runtime.artifacts.collector``,
        run in this runtime's task group; serve and worker pass ``--artifact-gc-interval``); None or 0: none.
        ``max_queued_runs``: a run start is refused when its tenant/project has this many queued runs (None: no limit).
        ``tracing``: where model calls and sandbox commands are traced (``runtime.telemetry``; default: nowhere).
        ``allow_webhook_hosts``: hosts a run's ``notify_url`` may name over plain http or at a private
        address (``--allow-webhook-hosts``; config.json's ``webhooks.allow_hosts`` adds to them);
        notifications are signed with ``$RATH_WEBHOOK_SECRET``.
        """
        check_scope_name("tenant", tenant)  # checked before the database is opened: a plain error
        check_scope_name("project", project)
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
        if create:  # 0700 (CONTRACT §11), made before the store would make it with the umask's mode
            await anyio.to_thread.run_sync(make_home, root)
        if sandbox_policy is None:  # a bad sandbox section in config.json is a plain error, before the store opens
            sandbox_policy = load_policy(root)
        made = make_embedder(embedder)  # ``embedder``: local, openai[:MODEL], none, or None for the default
        resolve_isolation(sandbox_policy.isolation)  # so is --isolation bwrap without bubblewrap
        blobs = open_blob_store(resolve_artifacts_url(artifacts, root))  # a bad URL or missing extra: a plain error
        limits_from_env()  # so is a bad $RATH_ARTIFACT_MAX_BYTES or $RATH_ARTIFACT_QUOTA
        secrets = load_secrets(root)  # a malformed "secrets" section: a plain error, before the store opens
        # so are bad hosts (the flag's and config.json's webhooks.allow_hosts) or a bad secret
        webhook_policy = WebhookPolicy(parse_hosts(allow_webhook_hosts) | hosts_from_config(root))
        webhook_key = secret_from_env()
        policy = load_call_policy(root)  # so is a malformed "policy"
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
                    tracing=tracing,
                    lease_s=lease_s,
                    poll_s=poll_s,
                    worker_slots=workers,
                    max_queued_runs=max_queued_runs,
                    webhook_policy=webhook_policy,
                    webhook_key=webhook_key,
                    semantic=None if made is None else Semantic(made),
                    blobs=blobs,
                    secrets=secrets,
                    policy=policy,
                )
                await tg.start(rt.runs.follow_others)  # listening before a worker claims: no cancel goes unheard
                if rt.semantic is not None:  # embeds what is not embedded yet, then each write's items
                    tg.start_soon(rt.semantic.run, rt.memory.store.vectors())
                if not url.read_only:  # an inspection fires nothing
                    tg.start_soon(rt.ticker.run)
                    if rt.webhooks.sender is not None:  # any server or worker sends the outbox's notifications
                        tg.start_soon(rt.webhooks.sender.run)
                    if artifact_gc_s:
                        tg.start_soon(rt.artifact_collector(artifact_gc_s).run)
                if workers:
                    tg.start_soon(partial(run_worker, rt.engine, slots=workers))
                redacting = secrets.redactor.install()  # log lines never show a resolved secret
                try:
                    yield rt
                except BaseException as exc:  # re-raised below, unwrapped by the task group
                    body_error = exc
                finally:
                    tg.cancel_scope.cancel()
                    with anyio.CancelScope(shield=True):  # close the model SDK clients even when cancelled
                        await rt.providers.aclose()
                    await rt._close_scopes()
                    redacting()
        finally:
            await backend.close()
        if body_error is not None:
            raise body_error
