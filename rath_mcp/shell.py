"""Shell inspection commands: ``rath-mcp sessions …`` and ``rath-mcp runs …`` (``sessions import``,
the one that writes, is ``rath_mcp.import_commands``).

They read the same store the server writes (SQLite allows concurrent readers), so a person can
look at what a running server is doing without going through MCP. They say on stderr which store
they read (stdout stays parseable), and never create one: a home with no store is an error that
says how to make one.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from rath_mcp.import_commands import add_import, run_import
from runtime import NotFoundError, Runtime, resolve_home
from runtime.errors import StoreError
from runtime.store import StoreURL, backend_module, resolve_store

HomeArg = Callable[[argparse.ArgumentParser], None]


def add_commands(sub: Any, home_arg: HomeArg) -> None:
    """Register ``sessions`` and ``runs`` on the top-level subparsers."""
    sessions = sub.add_parser("sessions", help="inspect sessions").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = sessions.add_parser("list", help="newest first")
    p.add_argument("--limit", type=whole(1), default=50, help="sessions per page (at most 500)")
    p.add_argument("--cursor", help="the cursor a previous page printed")
    home_arg(p)
    for name, help_text in (("show", "one session as JSON, with chunks"), ("lineage", "lineage as Mermaid")):
        p = sessions.add_parser(name, help=help_text)
        p.add_argument("session_id")
        if name == "lineage":
            p.add_argument("--depth", type=whole(1), default=20, help="steps of lineage around the session")
        home_arg(p)
    add_import(sessions, home_arg)

    runs = sub.add_parser("runs", help="inspect durable runs").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = runs.add_parser("list", help="newest first")
    p.add_argument("--status", help="only runs with this status (queued, running, waiting, succeeded, …)")
    p.add_argument("--workflow", help="only runs of this workflow")
    p.add_argument("--limit", type=whole(1), default=50, help="runs per page (at most 500)")
    p.add_argument("--cursor", help="the cursor a previous page printed")
    home_arg(p)
    p = runs.add_parser("show", help="one run summary as JSON, with its events")
    p.add_argument("run_id")
    home_arg(p)


def whole(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number no smaller than ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of {minimum} or more")
        return value

    return parse


def existing_store(home: Path, store: str | None = None) -> StoreURL:
    """The store ``--store`` names (default: the one under ``home``), said on stderr; a one-line error
    when a SQLite store's file is not there (it is never created here)."""
    url = resolve_store(store, home)
    backend_module(url)  # a backend not in this build: that one line, before anything is said
    path = url.path
    if path is not None and not path.is_file():
        where = "--store" if store is not None else "--home (or $RATH_HOME)"
        again = f" --store {url}" if store is not None else ""
        raise StoreError(
            f"there is no store at {path} (home {home}): nothing was stored there yet. Give the {where} "
            f"that holds your data, or create this one with `rath-mcp migrate --home {home}{again}` "
            "(a server creates it too)"
        )
    # The home says where a SQLite store's file lives; a database server's store has nothing to do with it.
    note(f"reading the store {store_name(url)}" + (f" (home {home})" if path is not None else ""))
    return url


def store_name(url: StoreURL) -> str:
    """How a message names a store: its file (SQLite), else its URL with any password redacted."""
    return str(url.path) if url.path is not None else str(url)


async def run(args: argparse.Namespace) -> int:
    """Run one inspection command against the store under ``--home``."""
    if args.command == "sessions" and args.action == "import":  # writes: opens (or creates) the store itself
        return await run_import(args)
    home = resolve_home(args.home)
    url = existing_store(home, args.store)
    # Inspecting must not run work (workers=0), nor create a store; it reads a store it may not write.
    async with Runtime.open(home, store=replace(url, read_only=True), workers=0, create=False) as rt:
        try:
            if args.command == "sessions":
                return await _sessions(rt, args)
            return await _runs(rt, args)
        except NotFoundError as exc:
            raise NotFoundError(_in_shell_words(str(exc), args)) from exc


def _in_shell_words(message: str, args: argparse.Namespace) -> str:
    """A not-found message whose hint names the shell command to use, not the MCP tool."""
    what = "sessions" if args.command == "sessions" else "runs"
    first = message.split(";", 1)[0]
    return f"{first}; list {what} with `rath-mcp {what} list` to find a valid id"


def note(message: str) -> None:
    """One line for the person running the program (stderr, flushed; stdout may carry the protocol)."""
    print(f"rath-mcp: {message}", file=sys.stderr, flush=True)


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


async def _sessions(rt: Runtime, args: argparse.Namespace) -> int:
    if args.action == "list":
        page, cursor = await rt.sessions.page(args.cursor, args.limit)
        for info in page:
            parents = ",".join(info.parents) or "-"
            chunks = f"{info.length:>6} chunk{'' if info.length == 1 else 's'}"
            print(f"{info.id}  {info.op:<7} {chunks:<13} {_when(info.created_at)}  parents={parents}")
        if cursor:
            print(f"more: --cursor {cursor}")
        return 0
    if args.action == "show":
        session = await rt.sessions.get(args.session_id)
        print(json.dumps({**session.info.summary(), "chunks": session.messages()}, indent=2, ensure_ascii=False))
        return 0
    print((await rt.sessions.lineage(args.session_id, args.depth)).mermaid())
    return 0


async def _runs(rt: Runtime, args: argparse.Namespace) -> int:
    if args.action == "list":
        page, cursor = await rt.runs.list(
            status=args.status, workflow=args.workflow, cursor=args.cursor, limit=args.limit
        )
        for run in page:
            waiting = f"  interrupts={len(run.pending_interrupts)}" if run.pending_interrupts else ""
            print(f"{run.id}  {run.workflow:<12} {run.status:<12} step={run.step or '-'}{waiting}")
        if cursor:
            print(f"more: --cursor {cursor}")
        return 0
    run = await rt.runs.get(args.run_id)
    events = await rt.runs.events(args.run_id, 0, 1000)
    body = {**run.summary(), "state": run.state, "events": [e.model_dump(mode="json") for e in events]}
    print(json.dumps(body, indent=2, ensure_ascii=False))
    return 0


def load_workflows(rt: Runtime, sources: Sequence[str]) -> None:
    """Load ``--workflows`` modules or files into the runtime's registry."""
    for source in sources:
        rt.workflows.load(source)


async def wait_for_stop_signal(announce: Callable[[], None] = lambda: None) -> None:
    """Return on SIGINT or SIGTERM (so a worker shuts down through its ``async with``).

    ``announce`` runs once the signals are ours: a supervisor that sends SIGTERM as soon as it reads
    the worker's ready line then stops it cleanly, instead of killing it with the default action."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        announce()
        async for _ in signals:
            return
