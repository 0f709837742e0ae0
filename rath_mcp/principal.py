"""Who is calling: the one value that authentication produces and grant/scope enforcement reads.

The HTTP transports authenticate a request (``--auth token|oauth``) and leave a :class:`Principal`
on the Starlette request (``request.state.rath_principal``). Every MCP handler reaches it through
:func:`principal_of` with the request context the SDK hands it (``ctx.request`` is that Starlette
request on HTTP transports, ``None`` on stdio). Where no authentication ran (stdio, or
``--auth none`` on a loopback host) the caller is the server's own local principal: every grant,
in the scope ``serve --tenant/--project`` chose.

Authentication lives in the HTTP layer; grants and scope are enforced in one place in the MCP
layer; this module is the contract between them and holds no logic of either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

#: Every grant a token can carry (CONTRACT §8). ``admin`` stands for all of them.
GRANTS: Final[tuple[str, ...]] = (
    "session.read",
    "session.write",
    "run.read",
    "run.create",
    "run.cancel",
    "interrupt.decide",
    "effect.resolve",
    "memory.read",
    "memory.write",
    "memory.delete",
    "artifact.read",
    "artifact.write",
    "schedule.write",
    "metrics.read",
    "admin",
)

#: The attribute of ``request.state`` where HTTP authentication leaves the caller.
STATE_KEY: Final = "rath_principal"


@dataclass(frozen=True)
class Principal:
    """A caller: who (``actor``: a token id, a JWT subject, or ``local``), where, and what it may do."""

    actor: str
    tenant: str
    project: str
    grants: frozenset[str] = field(default_factory=frozenset)
    #: how the caller was authenticated: ``local`` (stdio / no auth), ``token`` or ``oauth``
    method: str = "local"
    #: the token's rate limit, requests a second and at once (``token create --rate --burst``; None: none)
    rate: float | None = None
    burst: int | None = None

    def allows(self, grant: str) -> bool:
        """Whether this caller holds ``grant`` (``admin`` holds every grant)."""
        return "admin" in self.grants or grant in self.grants

    @classmethod
    def local(cls, tenant: str = "local", project: str = "default") -> Principal:
        """The caller of a trusted local pipe: every grant, in the server's chosen scope."""
        return cls(actor="local", tenant=tenant, project=project, grants=frozenset({"admin"}))


def principal_of(request: Any, default: Principal) -> Principal:
    """The caller of one MCP request: what HTTP authentication left on ``request``, else ``default``.

    ``request`` is the SDK context's ``request`` (a Starlette request on HTTP transports, ``None``
    on stdio and in memory).
    """
    state = getattr(request, "state", None)
    found = getattr(state, STATE_KEY, None) if state is not None else None
    return found if isinstance(found, Principal) else default
