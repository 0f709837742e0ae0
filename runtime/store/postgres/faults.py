"""What a lost PostgreSQL connection looks like through asyncpg, and the errors we raise for it.

A connection can be lost in many ways, and asyncpg reports each differently: the server refusing
the connection (``ConnectionRefusedError``), the backend terminated by ``pg_terminate_backend`` or a
shutdown (SQLSTATE class 57, ``AdminShutdownError``), the socket dropped under us
(``ConnectionDoesNotExistError``, ``ConnectionResetError``), a server still starting
(``CannotConnectNowError``), a connect that timed out. All of them mean the same thing to the
runtime: the store is unreachable right now, and a transaction that was open on it is gone.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import asyncpg

from runtime.errors import CommitUnknownError, StoreUnavailableError

# SQLSTATE classes that say the connection (not the statement) failed: 08 connection exception,
# 57 operator intervention (admin/crash shutdown, cannot connect now), 53300 too many connections.
_LOST_CLASSES = ("08", "57")
_LOST_STATES = ("53300",)
#: How long a connection may take to be made before the server counts as not there.
CONNECT_TIMEOUT_S = 5.0


class AmbiguousCommitError(CommitUnknownError):
    """The connection was lost while COMMIT was in flight and the outcome could not be learned.

    The transaction may or may not have committed: retrying it blindly could apply it twice, so the
    caller must find out from the data itself (an idempotency key, a fencing token) before retrying.
    """

    def __init__(self, where: str, xid: str | None, cause: BaseException) -> None:
        super().__init__(
            f"the PostgreSQL store at {where} was lost while committing (transaction {xid or 'unknown'}) "
            f"and could not be asked whether the commit happened ({_describe(cause)}); "
            "check whether the change is there before doing it again"
        )
        self.xid = xid


def is_connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` means the connection is gone (or could not be made), not that a statement failed."""
    if isinstance(exc, asyncpg.PostgresError):
        state = str(getattr(exc, "sqlstate", "") or "")
        return state.startswith(_LOST_CLASSES) or state in _LOST_STATES
    if isinstance(exc, asyncpg.InterfaceError):
        return "connection is closed" in str(exc)  # a call on a connection asyncpg already saw drop
    return isinstance(exc, OSError | asyncio.TimeoutError | EOFError)


def unreachable(where: str, exc: BaseException) -> StoreUnavailableError:
    """The one error every call gets while the server cannot be reached (and nothing was written)."""
    return StoreUnavailableError(
        f"the PostgreSQL store at {where} is unreachable ({_describe(exc)}); "
        "check that the server is running and the store URL is right"
    )


def is_future_xid(exc: BaseException) -> bool:
    """True for ``pg_xact_status``'s refusal of a transaction id the server never assigned (durably):
    after a crash the server may restart below an id whose transaction wrote no WAL to disk, and such
    a transaction cannot have committed (a commit's WAL record is flushed before the commit returns)."""
    return getattr(exc, "sqlstate", None) == "22023" and "in the future" in str(exc)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def safe_location(dsn: str) -> str:
    """``host:port/db`` of a URL, without the user's password, for error messages and logs."""
    parts = urlsplit(dsn)
    host = parts.hostname or "localhost"
    port = parts.port or 5432
    db = parts.path.lstrip("/") or (parts.username or "")
    return f"{host}:{port}/{db}"
