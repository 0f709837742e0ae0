"""``rath-mcp token create|list|revoke`` and ``rath-mcp audit``: the bodies behind cli.py's wiring.

``token create`` prints what it made on stdout, and the secret as the LAST line, once:
only its hash is stored, so it cannot be shown again. ``token list`` never prints secrets.
``audit`` prints the last records as JSON lines, oldest first.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from rath_mcp.principal import GRANTS
from rath_mcp.shell import existing_store, note, whole
from runtime import resolve_home
from runtime.backend import StoreBackend
from runtime.store import open_backend, resolve_store

HomeArg = Callable[[argparse.ArgumentParser], None]
MAX_AUDIT = 10_000


def add_commands(sub: Any, home_arg: HomeArg) -> None:
    """Register ``token`` and ``audit`` on the top-level subparsers."""
    tokens = sub.add_parser("token", help="bearer tokens for `serve --auth token`").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = tokens.add_parser("create", help="make a token; its secret is the last line printed, shown once")
    p.add_argument("--tenant", required=True, help="the tenant the token acts in")
    p.add_argument("--project", required=True, help="the project the token acts in")
    p.add_argument("--grants", required=True, metavar="G1,G2", help=f"comma-separated, of: {', '.join(GRANTS)}")
    p.add_argument("--name", help="a label for `token list`")
    p.add_argument("--ttl", metavar="DURATION", help="lifetime such as 30d, 12h, 15m (default: until revoked)")
    p.add_argument(
        "--rate", metavar="R/s", help="calls it may make, such as 5/s or 300/min, across every server of the store"
    )
    p.add_argument("--burst", type=whole(1), metavar="N", help="calls it may make at once (default: one second's)")
    home_arg(p)
    p = tokens.add_parser("list", help="every token, without secrets, as JSON lines")
    home_arg(p)
    p = tokens.add_parser("revoke", help="stop a token at once, on every server of the store")
    p.add_argument("token_id", metavar="TOKEN_ID")
    home_arg(p)
    p = sub.add_parser("audit", help="the audit trail (state changes and refusals) as JSON lines, oldest first")
    p.add_argument("--limit", type=whole(1), default=100, help=f"how many of the latest records (at most {MAX_AUDIT})")
    home_arg(p)


@asynccontextmanager
async def _store(args: argparse.Namespace, *, create: bool) -> AsyncIterator[StoreBackend]:
    home = resolve_home(args.home)
    url = resolve_store(args.store, home) if create else existing_store(home, args.store)
    backend: StoreBackend = await open_backend(url)
    try:
        yield backend
    finally:
        await backend.close()


def _when(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def token(args: argparse.Namespace) -> int:
    from runtime.access.rates import check_burst, limit_of, parse_rate
    from runtime.access.tokens import TokenService, parse_ttl  # only the token commands use it

    ttl, rate_text = getattr(args, "ttl", None), getattr(args, "rate", None)
    ttl_s = parse_ttl(ttl) if ttl is not None else None  # checked before the store opens
    rate = parse_rate(rate_text) if rate_text is not None else None
    burst = check_burst(getattr(args, "burst", None), rate)
    async with _store(args, create=args.action == "create") as backend:
        tokens = TokenService(backend.tokens(), GRANTS)
        if args.action == "create":
            record, secret = await tokens.create(
                args.tenant, args.project, args.grants.split(","), name=args.name, ttl_s=ttl_s, rate=rate, burst=burst
            )
            print(f"token {record.id} for {record.tenant}/{record.project}: {', '.join(record.grants)}")
            if (limit := limit_of(record.rate, record.burst)) is not None:
                print(f"rate limit {limit.describe()}, counted in the store across every server")
            print(f"expires {_when(record.expires_at)}" if record.expires_at else "expires: never (revoke to stop it)")
            note("the secret below is shown once and stored only as a hash: keep it now")
            print(secret, flush=True)
        elif args.action == "list":
            for found in await tokens.list():
                shown = found.public()
                for key in ("created_at", "expires_at", "revoked_at"):
                    shown[key] = _when(shown[key])
                print(json.dumps(shown))
        else:
            revoked = await tokens.revoke(args.token_id)
            print(f"revoked {revoked.id} at {_when(revoked.revoked_at)}")
    return 0


async def audit(args: argparse.Namespace) -> int:
    limit = min(args.limit, MAX_AUDIT)
    async with _store(args, create=False) as backend:
        for record in await backend.audit().recent(limit):
            shown = record.as_json()
            shown["time"] = _when(record.at)
            print(json.dumps(shown))
    return 0
