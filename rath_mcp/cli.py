"""``rath-mcp`` (also ``python -m rath_mcp``): serve, demo, migrate, worker, and shell inspection.

Thin on purpose: parse, call the runtime, and turn a domain error into one clear line on stderr
and exit code 1 (argparse uses 2 for bad usage). State lives under ``--home``, else
``$RATH_HOME``, else ``./.rath``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

import anyio

from rath_mcp import shell
from rath_mcp.shell import note
from runtime import InvalidInputError, RathError, Runtime, resolve_home
from runtime.errors import SchemaBehindError
from runtime.providers import configuration_problem
from runtime.store import apply_migrations, pending_migrations, resolve_store

EXIT_DOMAIN_ERROR = 1
EXIT_MIGRATIONS_PENDING = 2  # serve/worker on a store whose schema needs `rath-mcp migrate` first


def _home_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", help="state directory (default: $RATH_HOME, else ./.rath)")
    parser.add_argument(
        "--store",
        default=os.environ.get("RATH_STORE") or None,
        metavar="URL",
        help="sqlite:///ABSOLUTE/PATH.db or postgresql://user@host:port/dbname "
        "(default: $RATH_STORE, else rath.db under the home)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree of CONTRACT §3."""
    parser = argparse.ArgumentParser(prog="rath-mcp", description="A durable multi-agent runtime behind MCP.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    p.add_argument("--transport", choices=["stdio", "sse", "http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1", help="bind address for http/sse (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port for http/sse (0 picks a free one)")
    p.add_argument("--workflows", nargs="+", default=[], metavar="MODULE_OR_FILE", help="load extra workflows")
    p.add_argument("--sandbox", choices=["local", "opensandbox"], default="local", help="default sandbox backend")
    p.add_argument("--workers", type=int, default=4, help="runs this process drives at once (0: none here)")
    _home_arg(p)

    sub.add_parser("demo", help="a guided offline tour of the server through a real MCP client")

    p = sub.add_parser("migrate", help="apply pending store migrations")
    p.add_argument("--check", action="store_true", help="only report; exit 1 when migrations are pending")
    _home_arg(p)

    p = sub.add_parser("worker", help="run durable workers on a shared store until SIGINT/SIGTERM")
    p.add_argument("--workers", type=int, default=4, help="runs driven at once (default 4)")
    p.add_argument("--lease-s", type=float, default=30.0, help="how soon another worker may take over a dead one")
    p.add_argument("--workflows", nargs="+", default=[], metavar="MODULE_OR_FILE", help="load extra workflows")
    _home_arg(p)

    shell.add_commands(sub, _home_arg)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        return anyio.run(_dispatch, args)
    except SchemaBehindError as exc:
        print(f"rath-mcp: error: {exc}", file=sys.stderr)
        return EXIT_MIGRATIONS_PENDING
    except RathError as exc:
        print(f"rath-mcp: error: {exc}", file=sys.stderr)
        return EXIT_DOMAIN_ERROR
    except KeyboardInterrupt:
        return 130


async def _dispatch(args: argparse.Namespace) -> int:
    command: str = args.command
    if command == "serve":
        return await _serve(args)
    if command == "demo":
        from rath_mcp.demo import run_demo  # the MCP SDK is imported only by the commands that speak MCP

        return await run_demo()
    if command == "migrate":
        return await _migrate(args)
    if command == "worker":
        return await _worker(args)
    return await shell.run(args)


async def _serve(args: argparse.Namespace) -> int:
    from rath_mcp.server import build_server  # the MCP SDK is imported only by the commands that speak MCP
    from rath_mcp.transports import serve

    home = resolve_home(args.home)
    if (problem := configuration_problem(home)) is not None:
        note(problem)  # one line, then serve: the client's model (sampling) and offline workflows still work
    async with Runtime.open(home, store=args.store, workers=args.workers, sandbox=args.sandbox) as rt:
        shell.load_workflows(rt, args.workflows)
        await serve(build_server(rt), args.transport, host=args.host, port=args.port)
    return 0


async def _migrate(args: argparse.Namespace) -> int:
    url = resolve_store(args.store, resolve_home(args.home))
    path = url.path if url.path is not None else url
    if args.check:
        pending = await pending_migrations(url)
        for name in pending:
            print(f"pending: {name}")
        print(f"{len(pending)} migration(s) pending in {path}" if pending else f"{path} is up to date")
        return 1 if pending else 0
    pending = await apply_migrations(url)
    for name in pending:
        print(f"applied: {name}")
    print(f"{path}: {len(pending)} migration(s) applied" if pending else f"{path} was already up to date")
    return 0


async def _worker(args: argparse.Namespace) -> int:
    home = resolve_home(args.home)
    if args.workers < 1:
        raise InvalidInputError("--workers must be at least 1 for a worker process")
    async with Runtime.open(home, store=args.store, workers=args.workers, lease_s=args.lease_s) as rt:
        shell.load_workflows(rt, args.workflows)
        note(f"worker on {home} with {args.workers} slot(s); stop with Ctrl-C or SIGTERM")
        await shell.wait_for_stop_signal()
    note("worker stopped")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
