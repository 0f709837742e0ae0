"""``rath-mcp`` (also ``python -m rath_mcp``): serve, demo, migrate, worker, check, backup, inspection.

Thin on purpose: parse, call the runtime, and turn every error into one clear line on stderr and a
non-zero exit (1 for an error of the request, 2 for bad usage), never a traceback (CONTRACT §3).
State lives under ``--home``, else ``$RATH_HOME``, else ``~/.rath``.
"""

from __future__ import annotations

import argparse
import errno
import gc
import logging
import os
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NoReturn

import anyio
import anyio.to_thread

from rath_mcp import memory_commands, schedule_commands, shell
from rath_mcp.auth import commands as access_commands
from rath_mcp.auth.flags import AUTH_MODES, auth_problem
from rath_mcp.cli_usage import parse_command_line
from rath_mcp.shell import existing_store, note, store_name, whole
from runtime import InvalidInputError, RathError, Runtime, resolve_home
from runtime.artifacts.collector import interval_from_env
from runtime.errors import SchemaBehindError
from runtime.extras import MissingExtraError
from runtime.memory.embed import resolve_spec
from runtime.providers import configuration_problem
from runtime.runtime import check_scope_name
from runtime.sandbox.policy import SandboxPolicy, load_policy, parse_size
from runtime.store import StoreURL, apply_migrations, pending_migrations, resolve_store
from runtime.store.sqlite import health
from runtime.store.sqlite.migrations import ALL_MIGRATIONS
from runtime.telemetry import Tracing, from_environment
from runtime.telemetry.logs import correlate

EXIT_DOMAIN_ERROR = 1
EXIT_USAGE = 2
EXIT_MIGRATIONS_PENDING = 2  # serve/worker on a store whose schema needs `rath-mcp migrate` first
EXIT_INTERRUPTED = 130


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each option's default, except where there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, [], argparse.SUPPRESS):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line (argparse prints the whole usage block first)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _home_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", help="state directory (default: $RATH_HOME, else ~/.rath)")
    parser.add_argument(
        "--store",
        default=os.environ.get("RATH_STORE") or None,
        metavar="URL",
        help="sqlite:///ABSOLUTE/PATH.db or postgresql://user@host:port/dbname "
        "(default: $RATH_STORE, else rath.db under the home)",
    )


def _scope_name(what: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        try:
            return check_scope_name(what, text)
        except InvalidInputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _port(text: str) -> int:
    port = whole(0)(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give 1 to 65535, or 0 for a free one")
    return port


def _frame_bytes(text: str) -> int:
    try:
        return parse_size(text, "the frame limit")
    except RathError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _version() -> str:
    try:
        return version("rath-mcp")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _sandbox_args(parser: argparse.ArgumentParser) -> None:
    """Isolation, limits and network of the commands tools run (CONTRACT §11); unset means config.json's."""
    parser.add_argument(
        "--isolation",
        choices=["auto", "bwrap", "none"],
        help="how tool commands are isolated (default auto: bubblewrap where installed, else commands are refused)",
    )
    parser.add_argument("--allow-net", metavar="HOST[:PORT][,...]", help="hosts tool commands may reach (default none)")
    parser.add_argument("--tool-memory", metavar="SIZE", help="memory per tool command, all processes (default 2G)")
    parser.add_argument("--tool-procs", type=int, metavar="N", help="processes per tool command (default 256)")
    parser.add_argument("--tool-file-size", metavar="SIZE", help="largest file a tool command writes (default 256M)")
    parser.add_argument("--tool-cpu-s", type=int, metavar="S", help="CPU seconds per tool process (default 300)")


def _sandbox_policy(args: argparse.Namespace, home: Path) -> SandboxPolicy:
    flags = {
        "isolation": args.isolation,
        "allow_net": args.allow_net,
        "memory": args.tool_memory,
        "procs": args.tool_procs,
        "file_size": args.tool_file_size,
        "cpu_s": args.tool_cpu_s,
    }
    return load_policy(home, flags)


ARTIFACTS_HELP = (
    "where artifacts' bytes go: file:///DIR or s3://BUCKET/PREFIX (default: $RATH_ARTIFACTS, else HOME/artifacts)"
)
ARTIFACT_GC_HELP = "seconds between GC passes over the artifact store (default: $RATH_ARTIFACT_GC_S, else 3600; 0 none)"
QUEUED_HELP = "queued runs a tenant/project may have; run_start beyond it is an error naming the limit"
LEASE_HELP = (
    "seconds a claim on a run lasts unrenewed: how soon a worker on another machine may take over a dead one "
    "(a dead process on this host is taken over at once)"
)


def _embedder_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embedder",
        metavar="local|openai[:MODEL]|none",
        help="embeds memory for semantic recall (default: config.json memory.embedder, else local when installed)",
    )


def _webhook_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-webhook-hosts",
        metavar="HOST[,HOST...]",
        help="hosts a run's notify_url may name over plain http or at a private address (default: none: only "
        "https to public addresses); notifications are signed with $RATH_WEBHOOK_SECRET",
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree of CONTRACT §3."""
    parser = _Parser(prog="rath-mcp", description="A durable multi-agent runtime behind MCP.")
    parser.add_argument("--version", action="version", version=f"rath-mcp {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    p.add_argument("--transport", choices=["stdio", "sse", "http"], default="stdio", help="how clients connect")
    p.add_argument("--host", default="127.0.0.1", help="bind address for http/sse")
    p.add_argument("--port", type=_port, default=8765, help="port for http/sse (0 picks a free one)")
    p.add_argument("--workflows", nargs="+", default=[], metavar="MODULE_OR_FILE", help="load extra workflows")
    p.add_argument("--artifacts", default=os.environ.get("RATH_ARTIFACTS") or None, metavar="URL", help=ARTIFACTS_HELP)
    p.add_argument("--artifact-gc-interval", type=float, metavar="SECONDS", help=ARTIFACT_GC_HELP)
    p.add_argument("--sandbox", choices=["local", "opensandbox"], default="local", help="default sandbox backend")
    p.add_argument("--max-frame-bytes", type=_frame_bytes, metavar="SIZE", help="largest message served (default 4M)")
    p.add_argument("--workers", type=whole(0), default=4, help="runs this process drives at once (0: none here)")
    p.add_argument("--lease-s", type=_seconds, default=30.0, help=LEASE_HELP)
    p.add_argument("--max-queued-runs", type=whole(1), default=1000, metavar="N", help=QUEUED_HELP)
    _webhook_arg(p)
    p.add_argument("--auth", choices=AUTH_MODES, default="none", help="how HTTP/SSE callers authenticate")
    p.add_argument("--issuer", metavar="URL", help="--auth oauth: the authorization server's issuer URL")
    p.add_argument("--audience", metavar="URL", help="--auth oauth: the token audience (default: this server's URL)")
    local_scope = "of the local caller (stdio, --auth none)"
    p.add_argument("--tenant", type=_scope_name("tenant"), default="local", help=f"tenant {local_scope}")
    p.add_argument("--project", type=_scope_name("project"), default="default", help=f"project {local_scope}")
    _embedder_arg(p)
    _sandbox_args(p)
    _home_arg(p)

    sub.add_parser("demo", help="a guided offline tour of the server through a real MCP client")

    p = sub.add_parser("migrate", help="create the store, or apply its pending migrations")
    p.add_argument("--check", action="store_true", help="only report; exit 1 when migrations are pending")
    _home_arg(p)

    p = sub.add_parser("worker", help="run durable workers on a shared store until SIGINT/SIGTERM")
    p.add_argument("--workers", type=whole(1), default=4, help="runs driven at once")
    _webhook_arg(p)
    p.add_argument("--lease-s", type=_seconds, default=30.0, help=LEASE_HELP)
    p.add_argument("--workflows", nargs="+", default=[], metavar="MODULE_OR_FILE", help="load extra workflows")
    p.add_argument("--artifacts", default=os.environ.get("RATH_ARTIFACTS") or None, metavar="URL", help=ARTIFACTS_HELP)
    p.add_argument("--artifact-gc-interval", type=float, metavar="SECONDS", help=ARTIFACT_GC_HELP)
    _embedder_arg(p)
    _sandbox_args(p)
    _home_arg(p)

    p = sub.add_parser("check", help="check the store: integrity, schema, pending migrations (exit 1 if unhealthy)")
    _home_arg(p)
    p = sub.add_parser("backup", help="copy the store to DEST, consistently, even while servers write to it")
    p.add_argument("dest", metavar="DEST", help="a new file, or a directory (the copy is DEST/rath.db)")
    _home_arg(p)

    shell.add_commands(sub, _home_arg)
    access_commands.add_commands(sub, _home_arg)
    memory_commands.add_commands(sub, _home_arg)
    schedule_commands.add_commands(sub, _home_arg)
    return parser


def loaded() -> None:
    """The program has loaded: collect cycles from now on, but never scan what loading made.

    Only where the process entry (``rath_mcp.__main__``) turned the collector off for loading; a
    caller of ``main`` with the collector on (a test, an embedding program) keeps its own settings.
    """
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = build_parser()
    args = parse_command_line(parser, argv)
    if args.command == "serve" and (problem := _auth_problem(args)):
        parser.error(problem)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        return anyio.run(_dispatch, args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        return _report(exc)


def _report(exc: BaseException) -> int:
    """One line on stderr for an error that ended the command; the exit code."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:  # from inside a task group
        exc = exc.exceptions[0]
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, RathError):
        text = str(exc)
    elif isinstance(exc, OSError):
        text = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    else:  # a bug: still one line, with the traceback on request
        if os.environ.get("RATH_DEBUG"):
            logging.getLogger("rath_mcp").error("unexpected error", exc_info=exc)
        text = f"unexpected {type(exc).__name__}: {exc} (a bug; set RATH_DEBUG=1 to see the traceback)"
    print(f"rath-mcp: error: {' '.join(text.split())}", file=sys.stderr)
    return EXIT_MIGRATIONS_PENDING if isinstance(exc, SchemaBehindError) else EXIT_DOMAIN_ERROR


async def _dispatch(args: argparse.Namespace) -> int:
    command: str = args.command
    if command == "serve":
        return await _serve(args)  # loaded once its server is built
    loaded()
    if command == "demo":
        from rath_mcp.demo import run_demo  # the MCP SDK is imported only by the commands that speak MCP

        return await run_demo()
    if command == "migrate":
        return await _migrate(args)
    if command == "worker":
        return await _worker(args)
    if command == "check":
        return await _check(args)
    if command == "backup":
        return await _backup(args)
    if command == "token":
        return await access_commands.token(args)
    if command == "audit":
        return await access_commands.audit(args)
    if command == "memory":
        return await memory_commands.run(args)
    if command == "schedules":
        return await schedule_commands.run(args)
    return await shell.run(args)


async def _serve(args: argparse.Namespace) -> int:
    if args.issuer:
        from rath_mcp.auth.oauth import check_issuer

        check_issuer(args.issuer)

    if args.transport != "stdio":
        _check_listen(args.host, args.port)
    home = resolve_home(args.home)
    if (problem := configuration_problem(home)) is not None:
        note(problem)  # one line, then serve: the client's model (sampling) and offline workflows still work
    return await _traced(_serve_traced, args, home)


async def _serve_traced(args: argparse.Namespace, home: Path, policy: SandboxPolicy, traces: Tracing) -> int:
    from rath_mcp.auth.remote import remote_for
    from rath_mcp.server import build_server  # the MCP SDK is imported only by the commands that speak MCP
    from rath_mcp.transports import serve

    only_serve = {"tenant": args.tenant, "project": args.project, "max_queued_runs": args.max_queued_runs}
    async with _open_runtime(args, home, policy, traces, sandbox=args.sandbox, **only_serve) as rt:
        shell.load_workflows(rt, args.workflows)
        note(f"tool commands run with isolation: {rt.sandboxes.isolation}")
        remote = remote_for(rt, args.auth, issuer=args.issuer, audience=args.audience)
        if args.transport != "stdio":
            note(f"HTTP callers authenticate with: --auth {args.auth}")
        server = build_server(rt, remote=remote, traces=traces)
        loaded()
        frames = {"max_frame": args.max_frame_bytes} if args.max_frame_bytes else {}
        await serve(server, args.transport, host=args.host, port=args.port, gate=remote.gate, **frames)
    return 0


async def _traced(
    command: Callable[[argparse.Namespace, Path, SandboxPolicy, Tracing], Awaitable[int]],
    args: argparse.Namespace,
    home: Path,
) -> int:
    """``serve`` or ``worker`` with the sandbox policy its flags set and the tracing the environment asks
    for, whose last spans are sent however the command ends."""
    policy = _sandbox_policy(args, home)
    traces = _traces()
    try:
        return await command(args, home, policy, traces)
    finally:
        await _stop_traces(traces)


def _open_runtime(
    args: argparse.Namespace, home: Path, policy: SandboxPolicy, traces: Tracing, **only_serve: Any
) -> AbstractAsyncContextManager[Runtime]:
    """The runtime as ``serve`` and ``worker`` open it, from the flags both take (a flag added to both is
    passed here once); ``only_serve``: what only ``serve`` sets (its scope, queue bound, sandbox)."""
    return Runtime.open(
        home,
        store=args.store,
        workers=args.workers,
        lease_s=args.lease_s,
        allow_webhook_hosts=args.allow_webhook_hosts,
        sandbox_policy=policy,
        embedder=resolve_spec(args.embedder, home),
        artifacts=args.artifacts,
        artifact_gc_s=interval_from_env(args.artifact_gc_interval),
        tracing=traces,
        **only_serve,
    )


def _traces() -> Tracing:
    """The tracing the ``OTEL_*`` environment asks for; without the ``otel`` extra, one line and none."""
    try:
        traces = from_environment()
    except MissingExtraError as exc:
        note(f"traces are off: {exc}")
        return Tracing()
    for handler in logging.getLogger().handlers:  # each log line written in a span names it
        correlate(traces, handler)
    return traces


async def _stop_traces(traces: Tracing) -> None:
    """Send the last spans (bounded, off the event loop), also when the command was cancelled."""
    if traces.enabled:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(traces.shutdown)


def _auth_problem(args: argparse.Namespace) -> str | None:
    """Flags that cannot be served together (a usage error), checked before anything opens."""
    return auth_problem(args.transport, args.host, args.auth, args.issuer, args.audience)


def _check_listen(host: str, port: int) -> None:
    """Fail in one line, before the store is opened, when ``host:port`` cannot be listened on."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on --host {host!r} ({exc.strerror}); give an address such as 127.0.0.1") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            hint = "choose another --port (0 picks a free one)" if exc.errno == errno.EADDRINUSE else "check --host"
            raise OSError(f"cannot listen on {host}:{port} ({exc.strerror}); {hint}") from None


async def _migrate(args: argparse.Namespace) -> int:
    home = resolve_home(args.home)
    if args.check:
        url = existing_store(home, args.store)
        path = url.path or url
        pending = await pending_migrations(url)
        for name in pending:
            print(f"pending: {name}")
        print(f"{len(pending)} migration(s) pending in {path}" if pending else f"{path} is up to date")
        return 1 if pending else 0
    url = resolve_store(args.store, home)
    path = url.path or url
    created = url.path is not None and not url.path.exists()
    pending = await apply_migrations(url)
    for name in pending:
        print(f"applied: {name}")
    if created:
        print(f"{path}: created, {len(pending)} migration(s) applied")
    else:
        print(f"{path}: {len(pending)} migration(s) applied" if pending else f"{path} was already up to date")
    return 0


def _sqlite_file(url: StoreURL, command: str) -> Path:
    """The database file of a SQLite store (``check`` and ``backup`` read the file itself)."""
    if url.path is None:
        raise InvalidInputError(
            f"rath-mcp {command} works on a SQLite store (sqlite:///ABSOLUTE/PATH.db); {url} is a {url.scheme} one"
        )
    return url.path


async def _check(args: argparse.Namespace) -> int:
    path = _sqlite_file(existing_store(resolve_home(args.home), args.store), "check")
    report = await anyio.to_thread.run_sync(health.check, path, ALL_MIGRATIONS)
    print("integrity: ok" if not report.problems else "integrity: DAMAGED")
    for problem in report.problems:
        print(f"  {problem}")
    if report.foreign:
        print(f"contents: NOT A RATH STORE ({report.foreign})")
        print(f"{path} is NOT healthy: it belongs to another program; use another --home, or move the file aside")
        return 1
    if not report.problems:
        print("schema: complete" if not report.missing else f"schema: MISSING {', '.join(report.missing)}")
        print("migrations: up to date" if not report.pending else f"migrations: {len(report.pending)} pending")
        for name in report.pending:
            print(f"  pending: {name} (apply with `rath-mcp migrate`)")
    if report.read_only:  # a fact about this process's access, not a fault of the file
        print("access: READ-ONLY here (a server cannot write it: make the file and its directory writable)")
    if report.healthy:
        print(f"{path} is healthy" + (", but read-only here" if report.read_only else ""))
        return 0
    only_pending = not (report.problems or report.missing)
    hint = "apply them with `rath-mcp migrate`" if only_pending else health.RESTORE_HINT
    print(f"{path} is NOT healthy: {hint}")
    return 1


async def _backup(args: argparse.Namespace) -> int:
    path = _sqlite_file(existing_store(resolve_home(args.home), args.store), "backup")
    print(await anyio.to_thread.run_sync(_backup_to, path, args.dest))
    return 0


def _backup_to(path: Path, dest: str) -> str:
    written = health.backup(path, Path(dest).expanduser()).resolve()
    return f"backed up {path} to {written} ({written.stat().st_size} bytes, checked)"


async def _worker(args: argparse.Namespace) -> int:
    return await _traced(_work, args, resolve_home(args.home))


async def _work(args: argparse.Namespace, home: Path, policy: SandboxPolicy, traces: Tracing) -> int:
    async with _open_runtime(args, home, policy, traces) as rt:
        shell.load_workflows(rt, args.workflows)
        store = store_name(resolve_store(args.store, home))
        isolation = rt.sandboxes.isolation

        def announce() -> None:
            note(f"worker on the store {store} with {args.workers} slot(s); stop with Ctrl-C or SIGTERM")
            note(f"tool commands run with isolation: {isolation}")

        await shell.wait_for_stop_signal(announce)
    note("worker stopped")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
