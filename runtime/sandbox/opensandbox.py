"""The ``opensandbox`` backend: each workspace is a container managed by an OpenSandbox server.

The unmodified ``opensandbox`` SDK talks to the lifecycle API (create, list, connect, kill) and to
execd inside each sandbox (commands, files). A workspace is found again by its metadata label
(``rath-workspace``, plus ``rath-namespace`` so that several homes can share one server), so a
later ``open`` of the same name attaches to the same container instead of making a new one.

Settings come from arguments, else ``OPEN_SANDBOX_DOMAIN`` / ``OPEN_SANDBOX_API_KEY`` (read by the
SDK). The api key is never logged or put in error messages. Tests pass a local emulator's domain.

The runtime's ``SandboxPolicy`` is applied as far as the OpenSandbox API can express it: the memory
limit becomes the container's memory limit (``resourceLimits``: the whole container, not each
process), the allow-list becomes an egress ``networkPolicy`` (deny by default, allow each listed
host: the API matches host names only, so ports cannot be restricted), and the CPU, file-size and
process limits are set with ``ulimit`` around every command (see ``OpenSandboxSandbox``). The
workspace size cap is not checked here, and a workflow's own policy does not apply (containers are
made once per workspace).
"""

from __future__ import annotations

import contextlib
import posixpath
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

import anyio
import httpx
from opensandbox import Sandbox as SdkSandbox
from opensandbox import SandboxManager
from opensandbox.config import ConnectionConfig
from opensandbox.exceptions import SandboxException
from opensandbox.models.filesystem import WriteEntry
from opensandbox.models.sandboxes import NetworkPolicy, NetworkRule, SandboxFilter

from runtime.sandbox.base import (
    SandboxError,
    SandboxFileNotFoundError,
    check_workspace_name,
)
from runtime.sandbox.opensandbox_box import HIDDEN_PREFIX, OpenSandboxSandbox, translate
from runtime.sandbox.opensandbox_settings import OpenSandboxSettings
from runtime.sandbox.policy import SandboxPolicy
from runtime.sandbox.workspaces import WorkspaceExistsError

WORKSPACE_LABEL = "rath-workspace"
NAMESPACE_LABEL = "rath-namespace"
ATTEMPT_LABEL = "rath-attempt"  # one creation attempt, so a container whose start failed can be found and killed


class OpenSandboxBackend:
    """Workspaces as OpenSandbox containers; see the module docstring."""

    name = "opensandbox"

    def __init__(
        self,
        domain: str | None = None,
        api_key: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        settings: OpenSandboxSettings | None = None,
        policy: SandboxPolicy | None = None,
        **overrides: Any,
    ) -> None:
        self.policy = policy or SandboxPolicy()
        base = settings or OpenSandboxSettings()
        given: dict[str, Any] = {"domain": domain, "api_key": api_key, "transport": transport}
        self.settings = replace(base, **{k: v for k, v in given.items() if v is not None}, **overrides)
        self._lifecycle: SandboxManager | None = None
        if not self.settings.root_dir.startswith("/"):
            raise SandboxError(f"root_dir {self.settings.root_dir!r} must be an absolute path inside the container")

    def _config(self) -> ConnectionConfig:
        s = self.settings
        kwargs: dict[str, Any] = {
            "domain": s.domain,
            "api_key": s.api_key,
            "protocol": s.protocol,
            "request_timeout": timedelta(seconds=s.request_timeout_s),
            "use_server_proxy": s.use_server_proxy,
            "disable_metrics": True,  # the SDK would otherwise post create timings to the server
        }
        if s.transport is not None:
            kwargs["transport"] = s.transport
        return ConnectionConfig(**kwargs)

    def _labels(self, workspace: str) -> dict[str, str]:
        return {WORKSPACE_LABEL: workspace, NAMESPACE_LABEL: self.settings.namespace}

    async def _manager(self) -> SandboxManager:
        """One lifecycle client (one connection pool) for lookups and kills, made on first use."""
        if self._lifecycle is None:
            self._lifecycle = await SandboxManager.create(self._config())
        return self._lifecycle

    async def aclose(self) -> None:
        """Close the lifecycle client; containers are untouched."""
        manager, self._lifecycle = self._lifecycle, None
        if manager is not None:
            await manager.close()

    async def _find(self, workspace: str) -> str | None:
        """The id of the running container labelled with ``workspace``, if any."""
        manager = await self._manager()
        try:
            page = await manager.list_sandbox_infos(
                SandboxFilter(states=["Running"], metadata=self._labels(workspace), page_size=1)
            )
        except SandboxException as exc:
            raise translate(exc, f"look up workspace {workspace!r}") from exc
        return page.sandbox_infos[0].id if page.sandbox_infos else None

    async def open(self, workspace: str) -> OpenSandboxSandbox:
        check_workspace_name(workspace)
        existing = await self._find(workspace)
        return await (self._create(workspace) if existing is None else self._connect(workspace, existing))

    async def _connect(self, workspace: str, sandbox_id: str) -> OpenSandboxSandbox:
        try:
            sdk = await SdkSandbox.connect(
                sandbox_id,
                connection_config=self._config(),
                connect_timeout=timedelta(seconds=self.settings.ready_timeout_s),
            )
        except SandboxException as exc:
            raise translate(exc, f"open workspace {workspace!r}") from exc
        return self._box(workspace, sdk)

    async def _create(self, workspace: str) -> OpenSandboxSandbox:
        """A new container for ``workspace``. If it cannot be made ready (an error, a timeout, a
        cancel mid-start), it is killed, not left behind for the next ``open`` to attach to: it is
        found again by a label naming this one attempt."""
        s = self.settings
        attempt = {**self._labels(workspace), ATTEMPT_LABEL: uuid.uuid4().hex}
        sdk: SdkSandbox | None = None
        # Made here rather than inside the SDK, so that a start cancelled half-way can close its
        # connections under a shield (the SDK's own cleanup runs unshielded and is cut short).
        config = self._config().with_transport_if_missing()
        try:
            sdk = await SdkSandbox.create(
                s.image,
                metadata=attempt,
                resource={"cpu": "1", "memory": f"{max(1, self.policy.limits.memory_bytes // 1024**2)}Mi"},
                network_policy=self._network_policy(),
                timeout=None if s.sandbox_timeout_s is None else timedelta(seconds=s.sandbox_timeout_s),
                ready_timeout=timedelta(seconds=s.ready_timeout_s),
                connection_config=config,
            )
            await sdk.files.create_directories([WriteEntry(path=s.root_dir, mode=755)])
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self._kill_labelled(attempt)
                if sdk is not None:
                    await sdk.close()
                else:
                    await config.close_transport_if_owned()
            if isinstance(exc, SandboxException):
                raise translate(exc, f"open workspace {workspace!r}") from exc
            raise
        return self._box(workspace, sdk)

    def _network_policy(self) -> NetworkPolicy:
        """Egress: nothing by default; each allowed host by name (the API has no ports)."""
        hosts = dict.fromkeys(t.host for t in self.policy.allow_net)
        return NetworkPolicy(defaultAction="deny", egress=[NetworkRule(action="allow", target=h) for h in hosts])

    async def _kill_labelled(self, labels: dict[str, str]) -> None:
        """Kill every running container carrying ``labels`` (best effort: this is already cleanup)."""
        with contextlib.suppress(SandboxException, SandboxError):
            manager = await self._manager()
            page = await manager.list_sandbox_infos(SandboxFilter(states=["Running"], metadata=labels, page_size=10))
            for info in page.sandbox_infos:
                await manager.kill_sandbox(info.id)

    def _box(self, workspace: str, sdk: SdkSandbox) -> OpenSandboxSandbox:
        s = self.settings
        return OpenSandboxSandbox(
            workspace,
            sdk,
            root_dir=s.root_dir,
            max_output_bytes=s.max_output_bytes,
            max_file_bytes=s.max_file_bytes,
            policy=self.policy,
        )

    async def clone(self, src_workspace: str, dst_workspace: str) -> None:
        """Copy through a tar archive: there is no server-side copy between containers.

        The target is a container this call creates (never one it finds), and if the copy fails that
        container is killed by its own id, so a retry can run and nobody else's workspace is touched.
        """
        check_workspace_name(dst_workspace)
        if await self._find(src_workspace) is None:
            raise SandboxFileNotFoundError(f"workspace {src_workspace!r} does not exist; open it first")
        if await self._find(dst_workspace) is not None:
            raise WorkspaceExistsError(f"workspace {dst_workspace!r} already exists; choose a new name or destroy it")
        archive = f"{HIDDEN_PREFIX}clone-{uuid.uuid4().hex}.tar"
        remote = posixpath.join(self.settings.root_dir, archive)
        src = await self.open(src_workspace)
        try:
            packed = await src.run_command(["tar", "-cf", archive, f"--exclude=./{archive}", "."], timeout_s=300)
            if packed.exit_code != 0:
                raise SandboxError(f"could not pack workspace {src_workspace!r}: {packed.stderr.strip()}")
            data = await src.read_file(archive)
        finally:
            try:  # also when packing or reading failed (a part-written or too-large archive)
                await src.run_command(["rm", "-f", archive])
            finally:
                await src.close()
        if await self._find(dst_workspace) is not None:  # made by someone else while we packed
            raise WorkspaceExistsError(f"workspace {dst_workspace!r} already exists; choose a new name or destroy it")
        dst = await self._create(dst_workspace)
        try:
            await dst.sdk.files.write_file(remote, data, mode=644)
            unpacked = await dst.run_command(f"tar -xf {archive} && rm -f {archive}", timeout_s=300)
            if unpacked.exit_code != 0:
                raise SandboxError(f"could not unpack into workspace {dst_workspace!r}: {unpacked.stderr.strip()}")
        except BaseException:
            with anyio.CancelScope(shield=True), contextlib.suppress(SandboxException, SandboxError):
                await dst.sdk.kill()  # the half-made copy: ours, by its own id
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await dst.close()

    async def destroy(self, workspace: str) -> None:
        check_workspace_name(workspace)
        sandbox_id = await self._find(workspace)
        if sandbox_id is None:
            return
        try:
            await (await self._manager()).kill_sandbox(sandbox_id)
        except SandboxException as exc:
            raise translate(exc, f"destroy workspace {workspace!r}") from exc
