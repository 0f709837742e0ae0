"""``rath-mcp schedules list``: the schedules of a tenant/project, read from the store (nothing fires here)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from rath_mcp.shell import HomeArg, existing_store
from runtime import Runtime, resolve_home


def add_commands(sub: Any, home_arg: HomeArg) -> None:
    """Register ``schedules list`` on the top-level subparsers."""
    schedules = sub.add_parser("schedules", help="inspect scheduled runs").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = schedules.add_parser("list", help="oldest first, with each one's next tick")
    p.add_argument("--tenant", default="local", help="whose schedules (default local)")
    p.add_argument("--project", default="default", help="of which project (default default)")
    home_arg(p)


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


async def run(args: argparse.Namespace) -> int:
    home = resolve_home(args.home)
    url = existing_store(home, args.store)
    async with Runtime.open(home, store=replace(url, read_only=True), workers=0, create=False) as rt:
        with rt.scope(args.tenant, args.project):
            for s in await rt.schedules.list():
                state = "paused" if s["paused"] else f"next={_when(s['next_at'])}"
                name = f"  name={s['name']}" if s["name"] else ""
                print(f"{s['schedule_id']}  {s['workflow']:<12} {s['cron']!r} {s['timezone']} {state}{name}")
    return 0
