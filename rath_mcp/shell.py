"""Shell inspection commands: ``rath-mcp sessions …`` and ``rath-mcp runs …``.

They read the same store the server writes (SQLite allows concurrent readers), so a person can
look at what a running server is doing without going through MCP.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import anyio

from runtime import Runtime, resolve_home

HomeArg = Callable[[argparse.ArgumentParser], None]


def add_commands(sub: Any, home_arg: HomeArg) -> None:
    """Register ``sessions`` and ``runs`` on the top-level subparsers."""
    sessions = sub.add_parser("sessions", help="inspect sessions").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = sessions.add_parser("list", help="newest first")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--cursor")
    home_arg(p)
    for name, help_text in (("show", "one session as JSON, with chunks"), ("lineage", "lineage as Mermaid")):
        p = sessions.add_parser(name, help=help_text)
        p.add_argument("session_id")
        if name == "lineage":
            p.add_argument("--depth", type=int, default=20)
        home_arg(p)

    runs = sub.add_parser("runs", help="inspect durable runs").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = runs.add_parser("list", help="newest first")
    p.add_argument("--status")
    p.add_argument("--workflow")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--cursor")
    home_arg(p)
    p = runs.add_parser("show", help="one run summary as JSON, with its events")
    p.add_argument("run_id")
    home_arg(p)


async def run(args: argparse.Namespace) -> int:
    """Run one inspection command against the store under ``--home``."""
    home = resolve_home(args.home)
    async with Runtime.open(home, store=args.store, workers=0) as rt:  # inspecting must not run work
        if args.command == "sessions":
            return await _sessions(rt, args)
        return await _runs(rt, args)


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
            print(f"{info.id}  {info.op:<7} {info.length:>6} chunks  {_when(info.created_at)}  parents={parents}")
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


async def wait_for_stop_signal() -> None:
    """Return on SIGINT or SIGTERM (so a worker shuts down through its ``async with``)."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            return
