"""``build_server``: the one MCP server of rath-mcp, used by every transport, the demo and tests.

The runtime is opened by the caller (the CLI, a test) and outlives the server; the server holds
no state of its own beyond live subscriptions, so a restart loses nothing durable.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from mcp.server import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus

from rath_mcp import apps, audit, grants, logs, prompts, resources, sampling, sdk, subscriptions, tasks, tools, wire
from rath_mcp.apps import downloads
from rath_mcp.auth.remote import Remote, remote_for
from rath_mcp.errors import concise_validation_errors
from rath_mcp.principal import Principal
from rath_mcp.tracing import install as trace_requests
from rath_mcp.wait_clock import WaitClock
from rath_mcp.waiting import HEARTBEAT_S, RunWaiter
from runtime import Runtime
from runtime.telemetry import Tracing

SERVER_NAME = "rath-mcp"
INSTRUCTIONS = (
    "rath-mcp exposes a durable, session-centred multi-agent runtime. Sessions are immutable "
    "snapshots: every change returns a new session_id; fork and merge branch and join histories. "
    "Durable runs survive restarts; long calls return a run handle (poll with run_wait). "
    "Interrupts wait for a human: answer them with interrupt_resolve."
)


def server_version() -> str:
    """The installed distribution's version (what ``serverInfo.version`` reports)."""
    try:
        return version("rath-mcp")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0+source"


def build_server(
    rt: Runtime,
    *,
    heartbeat_s: float = HEARTBEAT_S,
    local: Principal | None = None,
    remote: Remote | None = None,
    clock: WaitClock | None = None,
    traces: Tracing | None = None,
) -> MCPServer:
    """An MCP server exposing ``rt``: tools, resources, prompts, completions and subscriptions.

    ``heartbeat_s`` is how often a waiting tool sends a progress notification when nothing changes.
    ``local``: the caller where no authentication ran (stdio, ``--auth none``); default every grant,
    in the scope ``rt`` was opened with.
    ``remote``: the audit trail and metrics shared with the HTTP gate (``serve --auth``); default: local.
    ``clock``: what waiting tools keep budgets and heartbeats by; default the event loop's.
    ``traces``: where each request's span goes (``runtime.telemetry``); default none.
    """
    bus = InMemorySubscriptionBus()
    server: MCPServer = MCPServer(
        SERVER_NAME,
        version=server_version(),
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        subscriptions=bus,
        extensions=[apps.extension()],
    )
    server.middleware.append(wire.guard_requests)
    grants.install(server, rt, local)  # before every other middleware: all of them run in the caller's scope
    client_sampling = sampling.install(server, rt)
    tools.register_all(server, rt, RunWaiter(rt, heartbeat_s=heartbeat_s, sampling=client_sampling, clock=clock))
    apps.link_tools(server)
    tasks.install(server, rt)  # outside the argument checks' rewording, so a refused task reads the same
    server.middleware.append(concise_validation_errors(sdk.strict_arguments(server)))
    resources.register_session_resources(server, rt)
    resources.register_run_resources(server, rt)
    resources.register_memory_resources(server, rt)
    resources.register_artifact_resources(server, rt)
    downloads.install(server, rt, local or Principal.local(rt.tenant, rt.project))  # /ui/artifacts/{id}
    prompts.register_prompts(server, rt)
    prompts.register_completions(server, rt)
    subscriptions.install(server, subscriptions.RunSubscriptions(rt, bus))
    logs.install(server)
    remote = remote or remote_for(rt)
    audit.install(server, remote.auditor, remote.metrics, remote.default)  # sees every refusal
    trace_requests(server, traces or Tracing())  # outermost: a request's span covers all the rest
    return server
