"""The checks of ``serve --auth/--issuer/--audience/--host`` made before anything opens (no MCP SDK here)."""

from __future__ import annotations

import ipaddress

AUTH_MODES = ("none", "token", "oauth")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def auth_problem(transport: str, host: str, auth: str, issuer: str | None, audience: str | None) -> str | None:
    """Why these ``serve`` flags cannot be served (a usage error, exit 2), or ``None``."""
    if auth == "oauth" and not issuer:
        return "--auth oauth needs --issuer URL (the authorization server whose tokens this server accepts)"
    if issuer and auth != "oauth":
        return "--issuer is for --auth oauth; add --auth oauth, or leave --issuer out"
    if audience and auth != "oauth":
        return "--audience is for --auth oauth; add --auth oauth, or leave --audience out"
    if transport == "stdio":
        if auth != "none":
            return f"--auth {auth} is for --transport http or sse: stdio is a trusted local pipe, with no tokens"
        return None
    if auth == "none" and not is_loopback(host):
        return (
            f"--host {host} is not a loopback address, and --auth none would let anyone who reaches the port act "
            "with every grant: add --auth token (see `rath-mcp token create`) or --auth oauth --issuer URL, "
            "or bind 127.0.0.1"
        )
    return None
